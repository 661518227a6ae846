"""The data file format: Parquet, one row group per key group, typed columns.

Keyed state files have the columns ``key_group``, ``key``, ``namespace`` (only when the
state has namespaces), then by kind: ``value`` (VALUE, REDUCING, AGGREGATING; the
accumulator for AGGREGATING), ``value`` as a list (LIST), or ``user_key`` and ``value``
with one row per map entry (MAP); with TTL, ``ttl_timestamp`` (epoch ms; a list of
them for LIST). Operator state files hold ``position`` and ``value`` (list states) or
``key`` and ``value`` (broadcast); raw state files hold bytes per key group or per
position. Pages carry CRC checksums; the file's key-value metadata names the state.

A subtask may hold several files of one state (Spark writers, streaming upserts); they
are applied in order: a row sets the value of its (key, namespace) — a null value
removes it — (VALUE, REDUCING, AGGREGATING), appends its elements (LIST), or sets its
map entry (MAP). A file may carry an ``op`` column (int8, 1 = delete): a delete row
removes its (key, namespace), or for MAP with a user key only that entry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flinkstate.state.descriptors import StateKind
from flinkstate.state.keyed.snapshot import Int64Columns, StateColumns, StateMetaInfo, StateSnapshot
from flinkstate.state.types.canonical import canonical_values
from flinkstate.state.types.mapping import TypeInformation

from .arrow_codec import from_arrow, int64_array, is_plain_int64, to_arrow
from .manifest import meta_to_json
from .parquet_files import FileSink, WrittenFile, read_row_group, write_row_groups

TTL_TYPE = pa.int64()


def keyed_schema(meta: StateMetaInfo, key_type: TypeInformation) -> pa.Schema:
    """The Arrow schema of a keyed state's file."""
    fields = [pa.field("key_group", pa.int32(), nullable=False), pa.field("key", key_type.to_arrow())]
    if meta.namespace_type is not None:
        fields.append(pa.field("namespace", meta.namespace_type.to_arrow()))
    value = meta.value_type.to_arrow()
    if meta.kind is StateKind.MAP:
        assert meta.user_key_type is not None
        fields += [pa.field("user_key", meta.user_key_type.to_arrow()), pa.field("value", value)]
    elif meta.kind is StateKind.LIST:
        fields.append(pa.field("value", pa.list_(value)))
    else:
        fields.append(pa.field("value", value))
    if meta.ttl is not None:
        ttl = pa.list_(TTL_TYPE) if meta.kind is StateKind.LIST else TTL_TYPE
        fields.append(pa.field("ttl_timestamp", ttl))
    doc = {
        "flinkstate.state": json.dumps(meta_to_json(meta)),
        "flinkstate.key_type": json.dumps(key_type.to_json()),
    }
    return pa.schema(fields, metadata=doc)


def _keyed_table(
    schema: pa.Schema,
    meta: StateMetaInfo,
    key_type: TypeInformation,
    kg: int,
    cols: StateColumns | Int64Columns,
) -> pa.Table:
    if isinstance(cols, Int64Columns):  # see write_keyed
        group = pa.repeat(pa.scalar(kg, pa.int32()), len(cols))
        return pa.Table.from_arrays([group, int64_array(cols.keys), int64_array(cols.values)], schema=schema)
    keys, namespaces, values, stamps = cols.keys, cols.namespaces, cols.values, cols.timestamps
    if meta.kind is StateKind.MAP:  # one row per map entry
        counts = [len(v) for v in values]
        keys = [k for k, c in zip(keys, counts, strict=True) for _ in range(c)]
        if namespaces is not None:
            namespaces = [n for n, c in zip(namespaces, counts, strict=True) for _ in range(c)]
        user_keys = [uk for v in values for uk in v]
        if stamps is not None:
            stamps = [ts[uk] for ts, v in zip(stamps, values, strict=True) for uk in v]
        values = [x for v in values for x in v.values()]
    arrays: list[pa.Array] = [pa.repeat(pa.scalar(kg, pa.int32()), len(keys)), to_arrow(keys, key_type)]
    if meta.namespace_type is not None:
        arrays.append(to_arrow(namespaces or [None] * len(keys), meta.namespace_type))
    if meta.kind is StateKind.MAP:
        assert meta.user_key_type is not None
        arrays.append(to_arrow(user_keys, meta.user_key_type))
    value_type = meta.value_type
    if meta.kind is StateKind.LIST:
        from flinkstate.state.types.mapping import ListTypeInfo

        value_type = ListTypeInfo(meta.value_type)
    arrays.append(to_arrow(values, value_type))
    if meta.ttl is not None:
        arrays.append(pa.array(stamps, schema.field("ttl_timestamp").type))
    return pa.Table.from_arrays(arrays, schema=schema)


def write_keyed(
    state: StateSnapshot, key_type: TypeInformation, key_groups: Iterable[int], sink: FileSink | None = None
) -> WrittenFile:
    """A keyed state file: one row group per non-empty key group, in the order given, into
    ``sink`` (default: memory; a file without rows is not left in a sink's storage).

    A state of plain int64 keys and values is read as int64 buffers when the snapshot can
    give them (:meth:`~StateSnapshot.int64_columns`), skipping Python lists altogether;
    otherwise a key group is read in bounded chunks (:meth:`~StateSnapshot.column_chunks`),
    each turned into Arrow before the next is read."""
    meta = state.meta
    schema = keyed_schema(meta, key_type)
    int64 = meta.kind not in (StateKind.LIST, StateKind.MAP) and meta.ttl is None
    int64 = int64 and meta.namespace_type is None
    int64 = int64 and is_plain_int64(key_type) and is_plain_int64(meta.value_type)

    def table(kg: int) -> pa.Table:
        fast = state.int64_columns(kg) if int64 else None
        if fast is not None:
            return _keyed_table(schema, meta, key_type, kg, fast)
        parts = [_keyed_table(schema, meta, key_type, kg, c) for c in state.column_chunks(kg) if len(c)]
        return schema.empty_table() if not parts else parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    return write_row_groups(schema, ((kg, table(kg)) for kg in key_groups), sink=sink, keep_empty=False)


def keyed_columns(
    table: pa.Table, meta: StateMetaInfo, key_type: TypeInformation, allow_pickle: bool
) -> StateColumns:
    """Restored columns of one key group's rows (MAP rows are folded back into dicts), keys,
    namespaces and user keys in their canonical form (one NaN, -0.0 apart from 0.0)."""
    keys = canonical_values(from_arrow(table.column("key"), key_type, allow_pickle), key_type)
    namespaces = None
    if meta.namespace_type is not None and "namespace" in table.column_names:
        namespaces = from_arrow(table.column("namespace"), meta.namespace_type, allow_pickle)
        namespaces = canonical_values(namespaces, meta.namespace_type)
    stamps = table.column("ttl_timestamp").to_pylist() if meta.ttl is not None else None
    if meta.kind is StateKind.LIST:
        from flinkstate.state.types.mapping import ListTypeInfo

        values = from_arrow(table.column("value"), ListTypeInfo(meta.value_type), allow_pickle)
        return StateColumns(keys, namespaces, values, stamps)
    values = from_arrow(table.column("value"), meta.value_type, allow_pickle)
    if meta.kind is not StateKind.MAP:
        return StateColumns(keys, namespaces, values, stamps)
    assert meta.user_key_type is not None
    user_keys = from_arrow(table.column("user_key"), meta.user_key_type, allow_pickle)
    user_keys = canonical_values(user_keys, meta.user_key_type)
    return _fold_map_rows(keys, namespaces, user_keys, values, stamps)


def _fold_map_rows(
    keys: list[Any],
    namespaces: list[Any] | None,
    user_keys: list[Any],
    values: list[Any],
    stamps: list[Any] | None,
) -> StateColumns:
    """One entry per (key, namespace) from one row per map entry. The rows of a scope are
    contiguous in a file written at once, but not when several files' rows are combined."""
    out = StateColumns([], [] if namespaces is not None else None, [], [] if stamps is not None else None)
    index: dict[tuple[Any, Any], int] = {}
    last: Any = object()
    at = -1
    for i, key in enumerate(keys):
        scope = (key, None if namespaces is None else namespaces[i])
        if scope == last:
            pass
        elif (found := index.get(scope)) is not None:
            last, at = scope, found
        else:
            last = scope
            at = index[scope] = len(out.keys)
            out.keys.append(key)
            if out.namespaces is not None:
                out.namespaces.append(scope[1])
            out.values.append({})
            if out.timestamps is not None:
                out.timestamps.append({})
        out.values[at][user_keys[i]] = values[i]
        if out.timestamps is not None and stamps is not None:
            out.timestamps[at][user_keys[i]] = stamps[i]
    return out


# -- operator and raw state ----------------------------------------------------------


def operator_schema(value_type: TypeInformation, key_type: TypeInformation | None) -> pa.Schema:
    first = pa.field("position", pa.int64()) if key_type is None else pa.field("key", key_type.to_arrow())
    return pa.schema([first, pa.field("value", value_type.to_arrow())])


def write_operator(
    elements: Any, value_type: TypeInformation, key_type: TypeInformation | None, sink: FileSink | None = None
) -> WrittenFile:
    """One operator state of one subtask: a list (positions) or a broadcast map (keys)."""
    schema = operator_schema(value_type, key_type)
    if key_type is None:
        first = pa.array(range(len(elements)), pa.int64())
        values = list(elements)
    else:
        first = to_arrow(list(elements), key_type)
        values = list(elements.values())
    table = pa.Table.from_arrays([first, to_arrow(values, value_type)], schema=schema)
    return write_row_groups(schema, [(0, table)], sink=sink)


def read_operator(
    pf: pq.ParquetFile,
    name: str,
    value_type: TypeInformation,
    key_type: TypeInformation | None,
    allow_pickle: bool,
) -> Any:
    tables = [read_row_group(pf, i, name) for i in range(pf.num_row_groups)]
    if not tables:
        return [] if key_type is None else {}
    table = pa.concat_tables(tables)
    values = from_arrow(table.column("value"), value_type, allow_pickle)
    if key_type is None:
        order = table.column("position").to_pylist()
        return [v for _, v in sorted(zip(order, values, strict=True), key=lambda p: p[0])]
    return dict(zip(from_arrow(table.column("key"), key_type, allow_pickle), values, strict=True))


RAW_KEYED = pa.schema([pa.field("key_group", pa.int32(), nullable=False), pa.field("data", pa.binary())])
RAW_OPERATOR = pa.schema([pa.field("position", pa.int64()), pa.field("data", pa.binary())])


def write_raw_keyed(blobs: dict[int, bytes], sink: FileSink | None = None) -> WrittenFile:
    tables = (
        (
            kg,
            pa.Table.from_arrays(
                [pa.array([kg], pa.int32()), pa.array([data], pa.binary())], schema=RAW_KEYED
            ),
        )
        for kg, data in sorted(blobs.items())
    )
    return write_row_groups(RAW_KEYED, tables, sink=sink)


def write_raw_operator(blobs: list[bytes], sink: FileSink | None = None) -> WrittenFile:
    table = pa.Table.from_arrays(
        [pa.array(range(len(blobs)), pa.int64()), pa.array(blobs, pa.binary())], schema=RAW_OPERATOR
    )
    return write_row_groups(RAW_OPERATOR, [(0, table)], sink=sink)


def storage_table(
    meta: StateMetaInfo,
    key_type: TypeInformation,
    key_group: int,
    cols: StateColumns,
    schema: pa.Schema | None = None,
) -> pa.Table:
    """Entries back in the stored layout (one key group), e.g. after :func:`merge_keyed`;
    ``schema``: :func:`keyed_schema` of ``meta`` and ``key_type``, when the caller has it."""
    schema = keyed_schema(meta, key_type) if schema is None else schema
    return _keyed_table(schema, meta, key_type, key_group, cols)
