"""Reading Flink's own savepoints and retained checkpoints (Flink 1.15+ metadata, 2.x
tested), without Flink: see :func:`read_savepoint`; writing canonical savepoints Flink 2.3
restores: see :func:`write_savepoint`."""

from __future__ import annotations

from .declared import StateDeclaration, declarations, parse_type
from .errors import (
    DeclaredTypeError,
    FlinkFormatError,
    UnsupportedFlinkFeatureError,
    UnsupportedFlinkWriteError,
    UnsupportedSerializerError,
)
from .metadata import is_flink_metadata
from .operator_id import operator_id_hex
from .rowdata import ROWDATA, RowDataReader, SqlTypeInfo, key_group_of
from .savepoint import FlinkSavepoint, FlinkState, is_flink_savepoint, read_savepoint
from .savepoint_writer import write_savepoint
from .write_pyflink import PICKLED_KEY, PYFLINK_MODES

__all__ = [
    "PICKLED_KEY",
    "PYFLINK_MODES",
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
    "is_flink_metadata",
    "is_flink_savepoint",
    "key_group_of",
    "operator_id_hex",
    "parse_type",
    "read_savepoint",
    "write_savepoint",
]
