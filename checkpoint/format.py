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

import hashlib
import json
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flinkstate.state.descriptors import StateKind
from flinkstate.state.keyed.snapshot import Int64Columns, StateColumns, StateMetaInfo, StateSnapshot
from flinkstate.state.types.canonical import canonical_values
from flinkstate.state.types.mapping import TypeInformation

from .arrow_codec import from_arrow, int64_array, is_plain_int64, to_arrow
from .errors import CheckpointCorruptError
from .manifest import meta_to_json

COMPRESSION = "snappy"


def writer_options(schema: pa.Schema) -> dict[str, Any]:
    """How data files are written: snappy pages with CRCs; dictionary encoding only for
    ``key_group`` (constant in a row group: nearly free), since trying it on unique keys
    costs several times the write and gains little. Min/max statistics only for
    ``key_group`` too: keys are hash-partitioned, so their ranges prune nothing, and the
    statistics of every column of every row group would make the footer (read by every
    partial restore) a large part of the file, or several times the data for raw blobs."""
    grouped = "key_group" in schema.names
    dictionary = ["key_group"] if grouped else False
    statistics = ["key_group"] if grouped else False
    return {
        "compression": COMPRESSION,
        "use_dictionary": dictionary,
        "write_statistics": statistics,
        "write_page_checksum": True,
    }


TTL_TYPE = pa.int64()


@dataclass(frozen=True)
class WrittenFile:
    """A finished data file: its bytes and what the manifest records about it."""

    data: Any
    """The file's bytes (any buffer: bytes, or an Arrow buffer written without a copy)."""
    rows: int
    key_groups: dict[int, tuple[int, int]]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(memoryview(self.data)).hexdigest()

    @property
    def footer_sha256(self) -> str:
        """SHA-256 of the Parquet footer and trailer: what a read of a few row groups checks."""
        view = memoryview(self.data)
        length = int.from_bytes(view[-8:-4], "little")
        return hashlib.sha256(view[len(view) - 8 - length :]).hexdigest()


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


def write_keyed(state: StateSnapshot, key_type: TypeInformation, key_groups: Iterable[int]) -> WrittenFile:
    """A keyed state file: one row group per non-empty key group, in the order given.

    A state of plain int64 keys and values is read as int64 buffers when the snapshot can
    give them (:meth:`~StateSnapshot.int64_columns`), skipping Python lists altogether."""
    meta = state.meta
    schema = keyed_schema(meta, key_type)
    int64 = meta.kind not in (StateKind.LIST, StateKind.MAP) and meta.ttl is None
    int64 = int64 and meta.namespace_type is None
    int64 = int64 and is_plain_int64(key_type) and is_plain_int64(meta.value_type)

    def columns(kg: int) -> StateColumns | Int64Columns:
        fast = state.int64_columns(kg) if int64 else None
        return state.columns(kg) if fast is None else fast

    tables = ((kg, _keyed_table(schema, meta, key_type, kg, c)) for kg in key_groups if len(c := columns(kg)))
    return write_row_groups(schema, tables)


def write_row_groups(
    schema: pa.Schema, tables: Iterable[tuple[int, pa.Table]], pipelined: bool = True
) -> WrittenFile:
    """Write row groups in a second thread while the next table is built.

    Building a table from Python values holds the GIL; encoding and compressing a row
    group does not, so the two overlap. Small row groups (increments) are written inline
    (``pipelined=False``): handing each to a thread costs more than it saves.
    """
    sink = pa.BufferOutputStream()
    index: dict[int, tuple[int, int]] = {}
    rows = 0
    if not pipelined:
        with pq.ParquetWriter(sink, schema, **writer_options(schema)) as writer:
            for kg, table in tables:
                if table.num_rows:
                    index[kg] = (len(index), table.num_rows)
                    rows += table.num_rows
                    writer.write_table(table, row_group_size=table.num_rows)
        return WrittenFile(sink.getvalue(), rows, index)
    with (
        pq.ParquetWriter(sink, schema, **writer_options(schema)) as writer,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="parquet-writer") as pool,
    ):
        pending: Future[None] | None = None
        for kg, table in tables:
            if table.num_rows:
                index[kg] = (len(index), table.num_rows)
                rows += table.num_rows
                if pending is not None:
                    pending.result()
                pending = pool.submit(writer.write_table, table, row_group_size=table.num_rows)
        if pending is not None:
            pending.result()
    return WrittenFile(sink.getvalue(), rows, index)


PARQUET_MAGIC = b"PAR1"


def read_footer(source: Any, size: int) -> tuple[pq.FileMetaData, str]:
    """The footer of a Parquet file of ``size`` bytes, read exactly (its length, then it),
    and the SHA-256 of the footer with its trailer.

    Arrow would read a speculative 64 KiB tail instead, which for a small file is all of
    it and for a larger one several times its footer: a restore that wants a few row
    groups would read far more than them.
    """
    if size < 12:
        raise ValueError(f"{size} bytes is too short for a Parquet file")
    source.seek(size - 8)
    trailer = source.read(8)
    length = int.from_bytes(trailer[:4], "little")
    if len(trailer) != 8 or trailer[4:] != PARQUET_MAGIC or length + 12 > size:
        raise ValueError("no Parquet footer at the end of the file")
    source.seek(size - 8 - length)
    footer = source.read(length)
    if len(footer) != length:
        raise ValueError("the Parquet footer is truncated")
    digest = hashlib.sha256(footer + trailer).hexdigest()
    return pq.read_metadata(pa.BufferReader(PARQUET_MAGIC + footer + trailer)), digest


def open_parquet(
    source: Any, name: str, size: int | None = None, footer_sha256: str | None = None
) -> pq.ParquetFile:
    """A Parquet file over ``source``. With ``size`` (a file read by ranges) the footer is
    read exactly (see :func:`read_footer`) and checked against ``footer_sha256`` if given."""
    try:
        metadata, digest = (None, None) if size is None else read_footer(source, size)
        opened = pq.ParquetFile(source, metadata=metadata, page_checksum_verification=True, pre_buffer=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CheckpointCorruptError(f"data file {name} is not a readable Parquet file: {exc}") from exc
    if footer_sha256 is not None and digest != footer_sha256:
        raise CheckpointCorruptError(f"data file {name}: its footer does not match the manifest's checksum")
    return opened


def read_row_group(pf: pq.ParquetFile, index: int, name: str, columns: list[str] | None = None) -> pa.Table:
    try:
        return pf.read_row_group(index, columns=columns)
    except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
        raise CheckpointCorruptError(f"data file {name}: row group {index} is unreadable: {exc}") from exc


def read_row_groups(
    pf: pq.ParquetFile,
    indexes: list[int],
    name: str,
    columns: list[str] | None = None,
    use_threads: bool = False,
) -> list[pa.Table]:
    """Row groups ``indexes`` decoded in one call (cheaper than one by one), as one table each
    (``use_threads``: columns decoded in parallel, for a caller not already parallel)."""
    try:
        table = pf.read_row_groups(indexes, columns=columns, use_threads=use_threads)
        sizes = [pf.metadata.row_group(i).num_rows for i in indexes]
    except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
        raise CheckpointCorruptError(f"data file {name}: row groups {indexes} are unreadable: {exc}") from exc
    if sum(sizes) != table.num_rows:
        raise CheckpointCorruptError(f"data file {name}: row groups {indexes} hold {table.num_rows} rows, "
                                     f"its footer says {sum(sizes)}")  # fmt: skip
    out, start = [], 0
    for size in sizes:
        out.append(table.slice(start, size))
        start += size
    return out


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
    return write_row_groups(schema, [(0, table)])


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
    return write_row_groups(RAW_KEYED, tables)


def write_raw_operator(blobs: list[bytes]) -> WrittenFile:
    table = pa.Table.from_arrays(
        [pa.array(range(len(blobs)), pa.int64()), pa.array(blobs, pa.binary())], schema=RAW_OPERATOR
    )
    return write_row_groups(RAW_OPERATOR, [(0, table)])


def iter_row_groups(pf: pq.ParquetFile, name: str, indexes: Iterable[int]) -> Iterator[pa.Table]:
    for i in indexes:
        yield read_row_group(pf, i, name)


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
