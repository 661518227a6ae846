"""Errors of reading Flink's savepoints: part of the one flinkstate hierarchy."""

from __future__ import annotations

from flinkstate.state.errors import FlinkStateError

from ..errors import CheckpointCorruptError, CheckpointError


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


class DeclaredTypeError(FlinkStateError):
    """A declared type is malformed, applies to no such state, or does not fit its bytes."""

    default_code = "INVALID_OPTION"


class UnsupportedFlinkWriteError(CheckpointError):
    """A state, type or feature the savepoint writer cannot write yet (the message names it):
    refused before any file is written."""

    default_code = "FLINK_UNSUPPORTED"
