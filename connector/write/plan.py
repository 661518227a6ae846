"""A DataFrame's columns as one state: the state's types decided once on the driver
(:func:`make_plan`), and each task's rows as the state's rows (:func:`state_rows`), which
:func:`flinkstate.checkpoint.keyed_state_files` / :func:`~flinkstate.checkpoint.operator_state_file`
write as state files (the one way, for the batch writer and the streaming sink alike).

Option ``opColumn`` (streaming only) marks deletes: a true boolean, or one of
:data:`DELETE_WORDS` (any case).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.checkpoint import DELETE, OperatorStateInfo
from flinkstate.state import StateKind, StateMetaInfo, TypeInformation
from flinkstate.state.operator import OperatorStateMode
from flinkstate.state.ttl import StateTtlConfig, Time
from flinkstate.state.types import RowTypeInfo, to_type_info

from ..errors import OptionError
from ..options import WriteOptions

_KINDS = {"value": StateKind.VALUE, "list": StateKind.LIST, "map": StateKind.MAP}
_MODES = {
    "split": OperatorStateMode.SPLIT_DISTRIBUTE,
    "union": OperatorStateMode.UNION,
    "broadcast": OperatorStateMode.BROADCAST,
}
DELETE_WORDS = frozenset({"delete", "d", "-", "true", "1"})


@dataclass(frozen=True)
class WritePlan:
    """How a DataFrame's columns become one state (decided once, on the driver)."""

    options: WriteOptions
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...]
    user_key_column: str | None
    key_type: TypeInformation | None
    value_type: TypeInformation
    user_key_type: TypeInformation | None
    namespace_type: TypeInformation | None
    ttl: StateTtlConfig | None

    @property
    def keyed(self) -> bool:
        return self.options.state_type in _KINDS

    def meta(self) -> StateMetaInfo:
        kind = _KINDS[self.options.state_type]
        return StateMetaInfo(
            self.options.state, kind, self.value_type, self.user_key_type, self.namespace_type, self.ttl
        )

    def operator_info(self) -> OperatorStateInfo:
        mode = _MODES[self.options.state_type]
        return OperatorStateInfo(self.options.state, mode, self.value_type, self.key_type)


def _type_of(schema: pa.Schema, columns: tuple[str, ...]) -> TypeInformation:
    if len(columns) == 1:
        return to_type_info(schema.field(columns[0]).type)
    return RowTypeInfo(tuple(to_type_info(schema.field(c).type) for c in columns), columns)


def make_plan(options: WriteOptions, schema: pa.Schema, streaming: bool = False) -> WritePlan:
    """Check the options against the DataFrame's columns and derive the state's types."""
    names = schema.names
    special = [c for c in (options.op_column, options.position_column, options.namespace_column) if c]
    for column in (*options.key_columns, *options.value_columns, *special, options.user_key_column):
        if column is not None and column not in names:
            raise OptionError(f"column {column!r} is not in the DataFrame; its columns: {names}")
    if options.op_column and not streaming:
        raise OptionError("option opColumn is for the streaming sink only")
    user_key = options.user_key_column
    taken = {*options.key_columns, *special, *([user_key] if user_key else [])}
    values = options.value_columns or tuple(c for c in names if c not in taken)
    if options.state_type == "map" and user_key is None:
        if len(values) < 2:
            raise OptionError(
                "a map state needs a user key column: option userKeyColumn, or two value columns"
            )
        user_key, values = values[0], values[1:]
    if not values:
        raise OptionError("no value columns: set option valueColumns")
    ttl = None
    if options.ttl_ms is not None:
        if options.state_type not in _KINDS:
            raise OptionError("option ttl applies to keyed state only")
        ttl = StateTtlConfig.new_builder(Time.milliseconds(options.ttl_ms)).build()
    return WritePlan(
        options,
        options.key_columns,
        values,
        user_key if options.state_type == "map" else None,
        _type_of(schema, options.key_columns) if options.key_columns else None,
        _type_of(schema, values),
        to_type_info(schema.field(user_key).type) if options.state_type == "map" and user_key else None,
        to_type_info(schema.field(options.namespace_column).type) if options.namespace_column else None,
        ttl,
    )


def _column(table: pa.Table, columns: tuple[str, ...], t: TypeInformation) -> pa.Array:
    if len(columns) == 1:
        return table.column(columns[0]).combine_chunks().cast(t.to_arrow())
    arrays = [table.column(c).combine_chunks() for c in columns]
    return pa.StructArray.from_arrays(arrays, names=list(columns)).cast(t.to_arrow())


def state_rows(plan: WritePlan, table: pa.Table, streaming: bool = False) -> pa.Table:
    """A task's rows (Spark's columns) as the state's rows, for
    :func:`flinkstate.checkpoint.keyed_state_files` or :func:`~flinkstate.checkpoint.operator_state_file`:
    ``key`` and ``value`` of the state's types and, as the plan has them, ``namespace``,
    ``user_key``, ``position`` and (``streaming``) ``op``."""
    opts = plan.options
    cols: dict[str, Any] = {}
    if plan.key_type is not None:
        cols["key"] = _column(table, plan.key_columns, plan.key_type)
    if plan.namespace_type is not None:
        cols["namespace"] = table.column(opts.namespace_column).combine_chunks()
    if plan.user_key_type is not None:
        assert plan.user_key_column is not None
        cols["user_key"] = _column(table, (plan.user_key_column,), plan.user_key_type)
    cols["value"] = _column(table, plan.value_columns, plan.value_type)
    if plan.keyed and opts.position_column:
        cols["position"] = table.column(opts.position_column).combine_chunks()
    if plan.keyed and streaming and opts.op_column:
        cols["op"] = _ops(table.column(opts.op_column))
    return pa.table(cols)


def _ops(column: pa.ChunkedArray) -> pa.Array:
    values = column.combine_chunks()
    if pa.types.is_boolean(values.type):
        return pc.if_else(pc.fill_null(values, False), DELETE, 0).cast(pa.int8())
    words = pc.utf8_lower(values.cast(pa.string()))
    return pc.if_else(pc.is_in(words, value_set=pa.array(sorted(DELETE_WORDS))), DELETE, 0).cast(pa.int8())
