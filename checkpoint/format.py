"""The data file format: Parquet, one row group per key group, typed columns.

Keyed state files have the columns ``key_group``, ``key``, ``namespace`` (only when the
state has namespaces), then by kind: ``value`` (VALUE, REDUCING, AGGREGATING; the
accumulator for AGGREGATING), ``value`` as a list (LIST), or ``user_key`` and ``value``
with one row per map entry (MAP); with TTL, ``ttl_timestamp`` (epoch ms; a list of
them for LIST). Operator state files hold ``position`` and ``value`` (list states) or
``key`` and ``value`` (broadcast); raw state files hold bytes per key group or per
position. Pages carry CRC checksums; the file's key-value metadata names the state.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flinkstate.state.descriptors import StateKind
from flinkstate.state.snapshot import StateColumns, StateMetaInfo
from flinkstate.state.types import TypeInformation

from .arrow_codec import from_arrow, to_arrow
from .errors import CheckpointCorruptError
from .manifest import meta_to_json

COMPRESSION = "zstd"
TTL_TYPE = pa.int64()


@dataclass(frozen=True)
class WrittenFile:
    """A finished data file: its bytes and what the manifest records about it."""

    data: bytes
    rows: int
    key_groups: dict[int, tuple[int, int]]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


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
    schema: pa.Schema, meta: StateMetaInfo, key_type: TypeInformation, kg: int, cols: StateColumns
) -> pa.Table:
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
    arrays: list[pa.Array] = [pa.array([kg] * len(keys), pa.int32()), to_arrow(keys, key_type)]
    if meta.namespace_type is not None:
        arrays.append(to_arrow(namespaces or [None] * len(keys), meta.namespace_type))
    if meta.kind is StateKind.MAP:
        assert meta.user_key_type is not None
        arrays.append(to_arrow(user_keys, meta.user_key_type))
    value_type = meta.value_type
    if meta.kind is StateKind.LIST:
        from flinkstate.state.types import ListTypeInfo

        value_type = ListTypeInfo(meta.value_type)
    arrays.append(to_arrow(values, value_type))
    if meta.ttl is not None:
        arrays.append(pa.array(stamps, schema.field("ttl_timestamp").type))
    return pa.Table.from_arrays(arrays, schema=schema)


def write_keyed(
    meta: StateMetaInfo, key_type: TypeInformation, groups: Iterable[tuple[int, StateColumns]]
) -> WrittenFile:
    """A keyed state file: one row group per non-empty key group, in the order given."""
    schema = keyed_schema(meta, key_type)
    return _write(schema, ((kg, _keyed_table(schema, meta, key_type, kg, c)) for kg, c in groups if len(c)))


def _write(schema: pa.Schema, tables: Iterable[tuple[int, pa.Table]]) -> WrittenFile:
    sink = pa.BufferOutputStream()
    index: dict[int, tuple[int, int]] = {}
    rows = 0
    with pq.ParquetWriter(sink, schema, compression=COMPRESSION, write_page_checksum=True) as writer:
        for kg, table in tables:
            if table.num_rows:
                index[kg] = (len(index), table.num_rows)
                writer.write_table(table, row_group_size=table.num_rows)
                rows += table.num_rows
    return WrittenFile(sink.getvalue().to_pybytes(), rows, index)


def open_parquet(source: Any, name: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(source, page_checksum_verification=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CheckpointCorruptError(f"data file {name} is not a readable Parquet file: {exc}") from exc


def read_row_group(pf: pq.ParquetFile, index: int, name: str, columns: list[str] | None = None) -> pa.Table:
    try:
        return pf.read_row_group(index, columns=columns)
    except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
        raise CheckpointCorruptError(f"data file {name}: row group {index} is unreadable: {exc}") from exc


def keyed_columns(
    table: pa.Table, meta: StateMetaInfo, key_type: TypeInformation, allow_pickle: bool
) -> StateColumns:
    """Restored columns of one key group's rows (MAP rows are folded back into dicts)."""
    keys = from_arrow(table.column("key"), key_type, allow_pickle)
    namespaces = None
    if meta.namespace_type is not None and "namespace" in table.column_names:
        namespaces = from_arrow(table.column("namespace"), meta.namespace_type, allow_pickle)
    stamps = table.column("ttl_timestamp").to_pylist() if meta.ttl is not None else None
    if meta.kind is StateKind.LIST:
        from flinkstate.state.types import ListTypeInfo

        values = from_arrow(table.column("value"), ListTypeInfo(meta.value_type), allow_pickle)
        return StateColumns(keys, namespaces, values, stamps)
    values = from_arrow(table.column("value"), meta.value_type, allow_pickle)
    if meta.kind is not StateKind.MAP:
        return StateColumns(keys, namespaces, values, stamps)
    assert meta.user_key_type is not None
    user_keys = from_arrow(table.column("user_key"), meta.user_key_type, allow_pickle)
    return _fold_map_rows(keys, namespaces, user_keys, values, stamps)


def _fold_map_rows(
    keys: list[Any],
    namespaces: list[Any] | None,
    user_keys: list[Any],
    values: list[Any],
    stamps: list[Any] | None,
) -> StateColumns:
    out = StateColumns([], [] if namespaces is not None else None, [], [] if stamps is not None else None)
    last: Any = object()
    for i, key in enumerate(keys):
        scope = (key, None if namespaces is None else namespaces[i])
        if scope != last:
            last = scope
            out.keys.append(key)
            if out.namespaces is not None:
                out.namespaces.append(scope[1])
            out.values.append({})
            if out.timestamps is not None:
                out.timestamps.append({})
        out.values[-1][user_keys[i]] = values[i]
        if out.timestamps is not None and stamps is not None:
            out.timestamps[-1][user_keys[i]] = stamps[i]
    return out


# -- operator and raw state ----------------------------------------------------------


def operator_schema(value_type: TypeInformation, key_type: TypeInformation | None) -> pa.Schema:
    first = pa.field("position", pa.int64()) if key_type is None else pa.field("key", key_type.to_arrow())
    return pa.schema([first, pa.field("value", value_type.to_arrow())])


def write_operator(
    elements: Any, value_type: TypeInformation, key_type: TypeInformation | None
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
    return _write(schema, [(0, table)])


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


def write_raw_keyed(blobs: dict[int, bytes]) -> WrittenFile:
    tables = (
        (
            kg,
            pa.Table.from_arrays(
                [pa.array([kg], pa.int32()), pa.array([data], pa.binary())], schema=RAW_KEYED
            ),
        )
        for kg, data in sorted(blobs.items())
    )
    return _write(RAW_KEYED, tables)


def write_raw_operator(blobs: list[bytes]) -> WrittenFile:
    table = pa.Table.from_arrays(
        [pa.array(range(len(blobs)), pa.int64()), pa.array(blobs, pa.binary())], schema=RAW_OPERATOR
    )
    return _write(RAW_OPERATOR, [(0, table)])


def iter_row_groups(pf: pq.ParquetFile, name: str, indexes: Iterable[int]) -> Iterator[pa.Table]:
    for i in indexes:
        yield read_row_group(pf, i, name)
