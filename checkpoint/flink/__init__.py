"""Reading Flink's own savepoints and retained checkpoints (Flink 1.13-2.3; 1.17, 1.20 and 2.3
tested), without Flink: see :func:`read_savepoint` (the release that wrote it:
:class:`FlinkVersions`); writing canonical savepoints Flink 2.3
restores: see :func:`write_savepoint` (from a checkpoint or savepoint) and
:func:`write_operators` (from :class:`ArrowOperator` s: Arrow columns, a DataFrame); edited
offline: :func:`edit_savepoint`; as one of our savepoints: :func:`import_savepoint`."""

from __future__ import annotations

from .errors import (
    DeclaredTypeError,
    FlinkFormatError,
    FlinkVersionRequiredError,
    UnsupportedFlinkFeatureError,
    UnsupportedFlinkWriteError,
    UnsupportedSerializerError,
)
from .metadata.metadata_read import is_flink_metadata
from .metadata.operator_id import operator_id_hex
from .metadata.versions import FlinkTarget, FlinkVersions
from .metadata.versions import parse_release as parse_flink_release
from .reader.importing import import_savepoint
from .reader.nested import nested_view
from .reader.savepoint import FlinkSavepoint, FlinkState, is_flink_savepoint, read_savepoint
from .reader.tables import hashed_key_type
from .types.classes import ROWDATA
from .types.declared_read import StateDeclaration, declarations, parse_type
from .types.declared_write import flink_type
from .types.rowdata_read import RowDataReader, SqlTypeInfo, key_group_of
from .writer.arrow import ArrowOperator, ArrowState, with_operator
from .writer.edit import edit_savepoint, plan_savepoint_edits
from .writer.plan import StatePlan, convert_plan
from .writer.pyflink import PICKLED_KEY, PYFLINK_MODES
from .writer.savepoint import flink_target, write_operators, write_savepoint

__all__ = [
    "PICKLED_KEY",
    "PYFLINK_MODES",
    "ROWDATA",
    "ArrowOperator",
    "ArrowState",
    "DeclaredTypeError",
    "FlinkFormatError",
    "FlinkSavepoint",
    "FlinkState",
    "FlinkTarget",
    "FlinkVersionRequiredError",
    "FlinkVersions",
    "RowDataReader",
    "SqlTypeInfo",
    "StateDeclaration",
    "StatePlan",
    "UnsupportedFlinkFeatureError",
    "UnsupportedFlinkWriteError",
    "UnsupportedSerializerError",
    "convert_plan",
    "declarations",
    "edit_savepoint",
    "flink_target",
    "flink_type",
    "hashed_key_type",
    "import_savepoint",
    "is_flink_metadata",
    "is_flink_savepoint",
    "key_group_of",
    "nested_view",
    "operator_id_hex",
    "parse_flink_release",
    "parse_type",
    "plan_savepoint_edits",
    "read_savepoint",
    "with_operator",
    "write_operators",
    "write_savepoint",
]
