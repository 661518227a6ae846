"""Reading Flink's own savepoints and retained checkpoints (Flink 1.15+ metadata, 2.x
tested), without Flink: see :func:`read_savepoint`."""

from __future__ import annotations

from .declared import StateDeclaration, parse_type
from .errors import (
    DeclaredTypeError,
    FlinkFormatError,
    UnsupportedFlinkFeatureError,
    UnsupportedSerializerError,
)
from .savepoint import FlinkSavepoint, FlinkState, is_flink_savepoint, read_savepoint

__all__ = [
    "DeclaredTypeError",
    "FlinkFormatError",
    "FlinkSavepoint",
    "FlinkState",
    "StateDeclaration",
    "UnsupportedFlinkFeatureError",
    "UnsupportedSerializerError",
    "is_flink_savepoint",
    "parse_type",
    "read_savepoint",
]
