"""Errors of reading Flink's savepoints: part of the one flinkstate hierarchy."""

from __future__ import annotations

from ..errors import CheckpointCorruptError, CheckpointError
from ..errors import DeclaredTypeError as DeclaredTypeError  # raised by the readers and writers here too


class FlinkFormatError(CheckpointCorruptError):
    """A Flink savepoint or checkpoint file is truncated, altered or of an unknown format."""

    default_code = "FLINK_FORMAT"


class UnsupportedSerializerError(FlinkFormatError):
    """A state's serializer cannot be decoded (Kryo, custom, pickled without allow_pickle)."""

    default_code = "UNSUPPORTED_SERIALIZER"


class UnsupportedFlinkFeatureError(FlinkFormatError):
    """A valid Flink file uses a feature this reader cannot decode (the message says which)."""

    default_code = "FLINK_UNSUPPORTED"


class FlinkHeaderConflictError(FlinkFormatError):
    """Two subtasks' keyed state headers describe one state (or the key) differently."""

    default_code = "FLINK_HEADER_CONFLICT"


class FlinkVersionRequiredError(CheckpointError):
    """A state's bytes depend on the Flink release that wrote them (Kryo 2 in 1.x, Kryo 5 in 2.x)
    and the savepoint's files do not tell which: the message asks for ``flink_version``
    (option ``flinkVersion``)."""

    default_code = "FLINK_VERSION_REQUIRED"


class UnsupportedFlinkWriteError(CheckpointError):
    """A state, type or feature the savepoint writer cannot write yet (the message names it):
    refused before any file is written."""

    default_code = "FLINK_UNSUPPORTED"
