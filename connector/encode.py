"""Turning a Spark task's rows (Arrow) into state files, grouped by key group.

Used by the batch writer and the streaming sink. Keys get their key groups exactly as
the state engine assigns them; rows are sorted by key group (stably), a file is written
per subtask range the task touched, with one row group per key group. Within a file a
scope appears once: for VALUE and MAP state the task's last row for it wins, LIST rows
are gathered into the list (by ``positionColumn`` when given, else in row order); in a
streaming batch a LIST scope that a delete row emptied is a delete row, then the list of
the elements after that delete. A list never takes a null element.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.checkpoint import (
    OperatorStateInfo,
    WrittenFile,
    from_arrow,
    keyed_schema,
    operator_schema,
    write_row_groups,
)
from flinkstate.state import (
    InvalidArgumentError,
    StateKind,
    StateMetaInfo,
    TypeInformation,
    compute_operator_index_for_key_group,
)
from flinkstate.state.keygroups import assign_key_groups
from flinkstate.state.operator import OperatorStateMode
from flinkstate.state.ttl import StateTtlConfig, Time
from flinkstate.state.types import RowTypeInfo, canonical_nans, key_token, to_type_info

from .errors import OptionError
from .options import WriteOptions

_KINDS = {"value": StateKind.VALUE, "list": StateKind.LIST, "map": StateKind.MAP}
_MODES = {
    "split": OperatorStateMode.SPLIT_DISTRIBUTE,
    "union": OperatorStateMode.UNION,
    "broadcast": OperatorStateMode.BROADCAST,
}
DELETE_WORDS = frozenset({"delete", "d", "-", "true", "1"})
DELETE = 1  # ``op`` of a row that deletes


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


def _key_column(table: pa.Table, columns: tuple[str, ...], t: TypeInformation) -> pa.Array:
    """A column of keys (or user keys, namespaces) with every NaN the one NaN, so that equal
    keys have equal bits (:mod:`flinkstate.state.types.canonical`)."""
    return canonical_nans(_column(table, columns, t))


def encode_keyed(plan: WritePlan, table: pa.Table, streaming: bool = False) -> dict[int, WrittenFile]:
    """This task's rows as one file per subtask range they fall in."""
    assert plan.key_type is not None
    opts, meta = plan.options, plan.meta()
    key = _key_column(table, plan.key_columns, plan.key_type)
    cols: dict[str, Any] = {
        "key_group": assign_key_groups(key, plan.key_type, opts.max_parallelism),
        "key": key,
    }
    if plan.namespace_type is not None:
        cols["namespace"] = canonical_nans(table.column(opts.namespace_column).combine_chunks())
    if plan.user_key_type is not None:
        assert plan.user_key_column is not None
        cols["user_key"] = _key_column(table, (plan.user_key_column,), plan.user_key_type)
    cols["value"] = _column(table, plan.value_columns, plan.value_type)
    if opts.position_column:
        cols["position"] = table.column(opts.position_column).combine_chunks()
    if streaming and opts.op_column:
        cols["op"] = _ops(table.column(opts.op_column))
    if meta.kind is StateKind.LIST:
        refuse_null_elements(plan, cols["value"], cols.get("op"))
    work = pa.table(cols)
    work = work.take(pc.sort_indices(work, sort_keys=[("key_group", "ascending")]))
    if meta.kind is StateKind.LIST or _repeats(work, meta):
        work = _scoped_rows(work, meta, from_arrow(work.column("key"), plan.key_type, allow_pickle=True))
    schema = keyed_schema(meta, plan.key_type)
    if "op" in work.column_names:
        schema = schema.append(pa.field("op", pa.int8()))
    now = int(time.time() * 1000)
    by_subtask: dict[int, list[tuple[int, pa.Table]]] = {}
    for kg, table_kg in _split_by_key_group(work):
        index = compute_operator_index_for_key_group(opts.max_parallelism, opts.parallelism, kg)
        by_subtask.setdefault(index, []).append((kg, _stored_layout(table_kg, meta, schema, now)))
    return {index: write_row_groups(schema, tables) for index, tables in by_subtask.items()}


def _repeats(work: pa.Table, meta: StateMetaInfo) -> bool:
    """Whether some scope (key, namespace[, user key]) has more than one row."""
    scope = [c for c in ("key", "namespace") if c in work.column_names]
    if meta.kind is StateKind.MAP:
        scope.append("user_key")
    key = work.column("key")
    if scope == ["key"] and pa.types.is_integer(key.type) and key.null_count == 0:
        ordered = np.sort(key.to_numpy())  # integer sorts are fast; repeats end up adjacent
        return bool((ordered[1:] == ordered[:-1]).any())
    try:
        return bool(work.group_by(scope, use_threads=False).aggregate([]).num_rows != work.num_rows)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return True


def _ops(column: pa.ChunkedArray) -> pa.Array:
    values = column.combine_chunks()
    if pa.types.is_boolean(values.type):
        return pc.if_else(pc.fill_null(values, False), 1, 0).cast(pa.int8())
    words = pc.utf8_lower(values.cast(pa.string()))
    return pc.if_else(pc.is_in(words, value_set=pa.array(sorted(DELETE_WORDS))), 1, 0).cast(pa.int8())


def _scoped_rows(work: pa.Table, meta: StateMetaInfo, keys: list[Any]) -> pa.Table:
    """Rows sorted by key group with each scope once (last wins / lists gathered)."""
    n = work.num_rows
    namespaces = (
        [key_token(v) for v in work.column("namespace").to_pylist()]
        if "namespace" in work.column_names
        else [None] * n
    )
    groups = work.column("key_group").to_pylist()
    frozen_keys = [key_token(k) for k in keys]
    scopes: list[Any] = list(zip(groups, frozen_keys, namespaces, strict=True))
    if meta.kind is StateKind.LIST:
        return _gather_lists(work, scopes)
    if meta.kind is StateKind.MAP:
        user_keys = [key_token(u) for u in work.column("user_key").to_pylist()]
        scopes = [(*s, u) for s, u in zip(scopes, user_keys, strict=True)]
    last: dict[Any, int] = {}
    for i, scope in enumerate(scopes):
        last[scope] = i
    if len(last) == n:
        return work
    keep = sorted(last.values())
    return work.take(pa.array(keep, pa.int64()))


def _gather_lists(work: pa.Table, scopes: list[Any]) -> pa.Table:
    """One list row per scope, the scope's rows applied in order (by ``position`` when
    given): a delete row (``op``) empties the list, other rows append their element. A
    scope a delete emptied starts with a delete row; the elements after it follow."""
    members: dict[Any, list[int]] = {}
    for i, scope in enumerate(scopes):
        members.setdefault(scope, []).append(i)
    if "position" in work.column_names:
        positions = work.column("position").to_pylist()
        for rows in members.values():
            rows.sort(key=lambda i: (positions[i] is None, positions[i]))
    ops = work.column("op").to_pylist() if "op" in work.column_names else None
    heads: list[int] = []  # the row whose key and namespace each output row takes
    out_ops: list[int] = []
    elements: list[list[int]] = []
    for rows in members.values():
        cut = 0
        if ops is not None:
            deletes = [j for j, i in enumerate(rows) if ops[i] == DELETE]
            if deletes:
                cut = deletes[-1] + 1
                heads.append(rows[deletes[-1]])
                out_ops.append(DELETE)
                elements.append([])
        if cut < len(rows):
            heads.append(rows[cut])
            out_ops.append(0)
            elements.append(rows[cut:])
    flat = pa.array([i for rows in elements for i in rows], pa.int64())
    offsets = [0]
    for rows in elements:
        offsets.append(offsets[-1] + len(rows))
    deleted = pa.array([op == DELETE for op in out_ops], pa.bool_())
    values = pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()), work.column("value").combine_chunks().take(flat), mask=deleted
    )
    take = pa.array(heads, pa.int64())
    out = {
        name: work.column(name).take(take) for name in work.column_names if name not in ("value", "position")
    }
    out["value"] = values
    if ops is not None:
        out["op"] = pa.array(out_ops, pa.int8())
    return pa.table(out)


def _split_by_key_group(rows: pa.Table) -> list[tuple[int, pa.Table]]:
    """(key group, its rows) of rows sorted by key group."""
    counts = pc.value_counts(rows.column("key_group")).to_pylist()
    out = []
    start = 0
    for item in counts:
        out.append((item["values"], rows.slice(start, item["counts"])))
        start += item["counts"]
    return out


def _stored_layout(table: pa.Table, meta: StateMetaInfo, schema: pa.Schema, now: int) -> pa.Table:
    cols: dict[str, Any] = {name: table.column(name) for name in schema.names if name in table.column_names}
    if meta.ttl is not None:
        n = table.num_rows
        if meta.kind is StateKind.LIST:
            lengths = pc.list_value_length(table.column("value")).to_pylist()  # null: a delete row
            stamps = [None if length is None else [now] * length for length in lengths]
            cols["ttl_timestamp"] = pa.array(stamps, pa.list_(pa.int64()))
        else:
            cols["ttl_timestamp"] = pa.array([now] * n, pa.int64())
    return pa.table({name: cols[name] for name in schema.names}).cast(schema)


def refuse_null_elements(plan: WritePlan, values: pa.Array, ops: pa.Array | None = None) -> None:
    """A list (keyed or operator) cannot hold None: a null value, but in a delete row, is
    ``[NULL_ELEMENT]`` naming the column(s), raised before anything is written."""
    nulls = values.is_null()
    if ops is not None:
        nulls = pc.and_(nulls, pc.not_equal(pc.fill_null(ops, 0), DELETE))
    count = pc.sum(nulls.cast(pa.int64())).as_py() or 0
    if count:
        columns = ", ".join(plan.value_columns)
        raise InvalidArgumentError(
            f"{count} row(s) hold null in value column {columns}: a list state cannot hold None "
            "elements; filter them out or fill them",
            code="NULL_ELEMENT",
        )


def last_per_key(keys: pa.Array) -> pa.Array:
    """Indexes (ascending) of the last row of each distinct key (Flink's rule: floats by
    bits, one NaN): later rows win."""
    last: dict[Any, int] = {}
    for i, k in enumerate(keys.to_pylist()):
        last[key_token(k)] = i
    return pa.array(sorted(last.values()), pa.int64())


def encode_operator(plan: WritePlan, table: pa.Table) -> WrittenFile:
    """This task's rows as one operator state file (a list, or a broadcast map)."""
    info = plan.operator_info()
    values = _column(table, plan.value_columns, plan.value_type)
    if info.mode is OperatorStateMode.BROADCAST:
        assert plan.key_type is not None
        keys = _key_column(table, plan.key_columns, plan.key_type)
        keep = last_per_key(keys)
        schema = operator_schema(plan.value_type, plan.key_type)
        out = pa.table({"key": keys.take(keep), "value": values.take(keep)}).cast(schema)
    else:
        refuse_null_elements(plan, values)
        schema = operator_schema(plan.value_type, None)
        position = pa.array(range(table.num_rows), pa.int64())
        out = pa.table({"position": position, "value": values}).cast(schema)
    return write_row_groups(schema, [(0, out)])
