"""Reading Flink's own savepoints and retained checkpoints (Flink 1.15+ metadata, 2.x
tested), without Flink: see :func:`read_savepoint`; writing canonical savepoints Flink 2.3
restores: see :func:`write_savepoint`; edited offline: :func:`edit_savepoint`; as one of our
savepoints: :func:`import_savepoint`."""

from __future__ import annotations

from .declared import StateDeclaration, declarations, parse_type
from .edit import edit_savepoint, plan_savepoint_edits
from .errors import (
    DeclaredTypeError,
    FlinkFormatError,
    UnsupportedFlinkFeatureError,
    UnsupportedFlinkWriteError,
    UnsupportedSerializerError,
)
from .importing import import_savepoint
from .metadata import is_flink_metadata
from .operator_id import operator_id_hex
from .rowdata import ROWDATA, RowDataReader, SqlTypeInfo, key_group_of
from .savepoint import FlinkSavepoint, FlinkState, is_flink_savepoint, read_savepoint
from .savepoint_writer import write_savepoint

__all__ = [
    "ROWDATA",
    "DeclaredTypeError",
    "FlinkFormatError",
    "FlinkSavepoint",
    "FlinkState",
    "RowDataReader",
    "SqlTypeInfo",
    "StateDeclaration",
    "UnsupportedFlinkFeatureError",
    "UnsupportedFlinkWriteError",
    "UnsupportedSerializerError",
    "declarations",
    "edit_savepoint",
    "import_savepoint",
    "is_flink_metadata",
    "is_flink_savepoint",
    "key_group_of",
    "operator_id_hex",
    "parse_type",
    "plan_savepoint_edits",
    "read_savepoint",
    "write_savepoint",
]
