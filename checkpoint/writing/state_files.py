"""Our state files from Arrow rows: the one way the Spark writer (``df.write``) and the
streaming sink (``df.writeStream``) turn a task's rows into a checkpoint's data files.

A task's files are stored under unique names (:func:`store_state_file`); a streaming sink's
chain of a subtask's files is merged into one (:func:`compacted_chain`).

A state's rows (columns ``key``, ``value`` and, as the state has them, ``namespace``,
``user_key``, ``position``, ``op``; key, user key and value of the state's Arrow types) get
their key groups exactly as the state engine assigns them; rows are sorted by key group
(stably), a file is written per subtask range they touch, with one row group per key group.
Within a file a scope appears once: for VALUE and MAP state the last row for it wins, LIST
rows are gathered into the list (by ``position`` when given, else in row order); with ``op``
(the streaming sink's deletes) a LIST scope that a delete row emptied is a delete row, then
the list of the elements after that delete. A list never takes a null element
(``[NULL_ELEMENT]``, before anything is written). Keys, user keys and namespaces are the same
when :mod:`flinkstate.state.types.canonical` says so (every NaN one NaN).
(:mod:`..state_rows` takes rows the same way for Flink's savepoints and offline edits.)
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.state.descriptors import StateKind
from flinkstate.state.errors import InvalidArgumentError
from flinkstate.state.keyed.snapshot import StateMetaInfo
from flinkstate.state.keygroups.assignment import KeyGroupRange, compute_operator_index_for_key_group
from flinkstate.state.keygroups.vectorized import assign_key_groups
from flinkstate.state.operator import OperatorStateMode
from flinkstate.state.types.canonical import canonical_nans, key_token
from flinkstate.state.types.mapping import TypeInformation

from ..arrow_codec import from_arrow
from ..fileref import FileRef
from ..format import keyed_schema, operator_schema
from ..manifest import Manifest, OperatorEntry, OperatorStateInfo, SubtaskEntry
from ..parquet_files import WrittenFile, read_row_group, write_row_groups
from ..reading.merge import DELETE, merged_key_group
from ..reading.restore import CompletedCheckpoint
from ..reading.verified import open_whole
from ..storage import Storage
from .writer import store_file


def keyed_state_files(
    rows: pa.Table,
    meta: StateMetaInfo,
    key_type: TypeInformation,
    max_parallelism: int,
    parallelism: int,
    what: str,
) -> dict[int, WrittenFile]:
    """A keyed state's rows as one file per subtask index whose range they fall in (see the
    module docstring); ``what`` names the value column(s) in errors."""
    key = canonical_nans(rows.column("key").combine_chunks())
    cols: dict[str, Any] = {"key_group": assign_key_groups(key, key_type, max_parallelism), "key": key}
    for name in ("namespace", "user_key"):
        if name in rows.column_names:
            cols[name] = canonical_nans(rows.column(name).combine_chunks())
    cols["value"] = rows.column("value").combine_chunks()
    for name in ("position", "op"):
        if name in rows.column_names:
            cols[name] = rows.column(name).combine_chunks()
    if meta.kind is StateKind.LIST:
        _refuse_null_elements(cols["value"], what, cols.get("op"))
    work = pa.table(cols)
    work = work.take(pc.sort_indices(work, sort_keys=[("key_group", "ascending")]))
    if meta.kind is StateKind.LIST or _repeats(work, meta):
        work = _scoped_rows(work, meta, from_arrow(work.column("key"), key_type, allow_pickle=True))
    schema = keyed_schema(meta, key_type)
    if "op" in work.column_names:
        schema = schema.append(pa.field("op", pa.int8()))
    now = int(time.time() * 1000)
    by_subtask: dict[int, list[tuple[int, pa.Table]]] = {}
    for kg, table_kg in _split_by_key_group(work):
        index = compute_operator_index_for_key_group(max_parallelism, parallelism, kg)
        by_subtask.setdefault(index, []).append((kg, _stored_layout(table_kg, meta, schema, now)))
    return {index: write_row_groups(schema, tables) for index, tables in by_subtask.items()}


def operator_state_file(rows: pa.Table, info: OperatorStateInfo, what: str) -> WrittenFile:
    """An operator state's rows (``value``; a broadcast state's ``key`` too) as one file: a
    list in row order, or a broadcast map where a later row wins a key."""
    values = rows.column("value").combine_chunks()
    if info.mode is OperatorStateMode.BROADCAST:
        assert info.user_key_type is not None
        keys = canonical_nans(rows.column("key").combine_chunks())
        keep = last_per_key(keys)
        schema = operator_schema(info.value_type, info.user_key_type)
        out = pa.table({"key": keys.take(keep), "value": values.take(keep)}).cast(schema)
    else:
        _refuse_null_elements(values, what)
        schema = operator_schema(info.value_type, None)
        position = pa.array(range(rows.num_rows), pa.int64())
        out = pa.table({"position": position, "value": values}).cast(schema)
    return write_row_groups(schema, [(0, out)])


def broadcast_map_file(directory: Storage, refs: Sequence[FileRef], info: OperatorStateInfo) -> WrittenFile:
    """The broadcast maps of ``refs`` (files in ``directory``, verified, in order) as one file:
    a later row wins a key."""
    assert info.user_key_type is not None
    schema = operator_schema(info.value_type, info.user_key_type)
    tables = []
    for ref in refs:
        pf = open_whole(directory, ref)
        groups = (read_row_group(pf, i, ref.path) for i in range(pf.num_row_groups))
        tables += [t.select(schema.names).cast(schema) for t in groups]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    merged = table.take(last_per_key(table.column("key").combine_chunks()))
    return write_row_groups(schema, [(0, merged)])


def store_state_file(directory: Storage, prefix: str, index: int, written: WrittenFile) -> FileRef:
    """Store a state file of subtask ``index`` in ``directory`` under a name no other task
    picks (``<prefix>-<random>-<index>.parquet``) and describe it for the manifest."""
    return store_file(directory, f"{prefix}-{uuid.uuid4().hex[:12]}-{index}.parquet", written)


def compacted_chain(
    directory: Storage, op: OperatorEntry, state: str, subtask: SubtaskEntry, allow_pickle: bool
) -> WrittenFile | None:
    """Subtask ``subtask``'s chain of keyed state ``state`` (files relative to ``directory``,
    applied in order, deletes included) merged into one full file; ``None`` when nothing is
    left in it."""
    meta = op.keyed_state(state)
    assert meta is not None and op.key_type is not None
    reader = CompletedCheckpoint(directory, Manifest(0, operators=(op,)), allow_pickle=allow_pickle)
    rng = None if subtask.key_group_range is None else KeyGroupRange(*subtask.key_group_range)
    tables = []
    for kg, parts in reader.read_keyed(op.uid, meta.name, rng):
        merged = merged_key_group(parts, meta, op.key_type, kg, allow_pickle)
        if merged.num_rows:
            tables.append((kg, merged))
    return write_row_groups(tables[0][1].schema, tables) if tables else None


def _refuse_null_elements(values: pa.Array, what: str, ops: pa.Array | None = None) -> None:
    """A list (keyed or operator) cannot hold None: a null value, but in a delete row, is
    ``[NULL_ELEMENT]`` naming ``what``, raised before anything is written."""
    nulls = values.is_null()
    if ops is not None:
        nulls = pc.and_(nulls, pc.not_equal(pc.fill_null(ops, 0), DELETE))
    count = pc.sum(nulls.cast(pa.int64())).as_py() or 0
    if count:
        raise InvalidArgumentError(
            f"{count} row(s) hold null in {what}: a list state cannot hold None "
            "elements; filter them out or fill them",
            code="NULL_ELEMENT",
        )


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


def last_per_key(keys: pa.Array) -> pa.Array:
    """Indexes (ascending) of the last row of each distinct key (Flink's rule: floats by
    bits, one NaN): later rows win."""
    last: dict[Any, int] = {}
    for i, k in enumerate(keys.to_pylist()):
        last[key_token(k)] = i
    return pa.array(sorted(last.values()), pa.int64())
