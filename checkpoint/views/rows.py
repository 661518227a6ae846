"""State as rows: stored row groups as the rows of a state's view (see :mod:`.views`).

The Spark reader and the ``flinkstate`` command both show state through these functions.
Keyed state: a key group's tables (one per file, in file order) are applied in order (see
:mod:`flinkstate.checkpoint.format`), narrowed to the wanted keys, and turned into view
rows with expired entries left out. Operator state: a subtask's files as list positions or
broadcast entries.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.state.descriptors import StateKind
from flinkstate.state.keyed.snapshot import StateMetaInfo
from flinkstate.state.ttl import TtlTimeCharacteristic
from flinkstate.state.types.canonical import key_token
from flinkstate.state.types.mapping import TypeInformation

from ..errors import CheckpointError
from ..manifest import FileRef
from ..parquet_files import read_row_group
from ..reading.keys import rows_of_keys
from ..reading.merge import stored_key_group
from ..reading.verified import open_whole
from ..storage import Storage
from .schemas import keyed_view


def key_group_rows(
    tables: list[pa.Table],
    key_group: int,
    meta: StateMetaInfo,
    key_type: TypeInformation | None,
    *,
    keys: Sequence[Any] | None = None,
    flatten: bool = True,
    expired_before: int | None = None,
    allow_pickle: bool = False,
) -> pa.Table | None:
    """The view rows of ``key_group`` from its stored ``tables`` (``None`` when there are none).

    ``keys``: only rows of these keys (typed values of ``key_type``); ``expired_before``: TTL
    timestamps at or before it are hidden (see :func:`expiry_cutoff`).
    """
    table = stored_key_group(tables, meta, key_type, key_group, allow_pickle)
    table = _storing_something(table, meta)
    if keys is not None:
        if key_type is None:
            raise CheckpointError(
                f"state {meta.name!r} has no key type recorded, so keys cannot be selected",
                code="INVALID_ARGUMENT",
            )
        table = rows_of_keys(table, keys, key_type)
    if not table.num_rows:
        return None
    view = keyed_view(table, meta, flatten, expired_before)
    return view if view.num_rows else None


def _storing_something(table: pa.Table, meta: StateMetaInfo) -> pa.Table:
    """``table`` without rows that store nothing, as a restore drops them: a null value (in
    Flink a null value is no value) or, for LIST, a null or empty list. Map entries may be null."""
    if meta.kind is StateKind.MAP:
        return table
    value = table.column("value")
    stored = pc.is_valid(value)
    if meta.kind is StateKind.LIST:
        stored = pc.and_(stored, pc.fill_null(pc.greater(pc.list_value_length(value), 0), False))
    return table if pc.all(stored).as_py() is not False else table.filter(stored)


def operator_rows(
    directory: Storage, refs: Sequence[FileRef], subtask: int, broadcast: bool
) -> pa.Table | None:
    """One subtask's operator state (its files, in order) as view rows: ``key`` and ``value``
    for broadcast state (one map: a key's last row wins, as in a restore), else ``subtask``,
    ``position`` and ``value`` (``None``: no rows). Each file is read whole and checked
    against its SHA-256."""
    tables = []
    for ref in refs:
        pf = open_whole(directory, ref)
        tables += [read_row_group(pf, i, ref.path) for i in range(pf.num_row_groups)]
    if not tables:
        return None
    table = pa.concat_tables(tables)
    if broadcast:
        view = _last_per_key(table.select(["key", "value"]))
    else:
        n = table.num_rows
        subtasks = pa.array([subtask] * n, pa.int32())
        positions = pa.array(range(n), pa.int32())
        view = pa.table({"subtask": subtasks, "position": positions, "value": table.column("value")})
    return view if view.num_rows else None


def _last_per_key(table: pa.Table) -> pa.Table:
    """One row per key: at its first row's place, with its last row's value (a dict's update)."""
    first: dict[Any, int] = {}
    last: dict[Any, int] = {}
    for i, key in enumerate(table.column("key").to_pylist()):
        token = key_token(key)
        first.setdefault(token, i)
        last[token] = i
    if len(first) == table.num_rows:
        return table
    keys = pc.take(table.column("key"), pa.array(list(first.values()), pa.int64()))
    values = pc.take(table.column("value"), pa.array(list(last.values()), pa.int64()))
    return pa.table({"key": keys, "value": values})


def expiry_cutoff(meta: StateMetaInfo, watermark: int | None = None, now_ms: int | None = None) -> int | None:
    """TTL timestamps at or before this are expired (``None``: nothing is hidden).

    Processing-time TTL is judged at ``now_ms`` (default: now); event-time TTL at
    ``watermark``, and without one nothing is hidden.
    """
    if meta.ttl is None:
        return None
    if meta.ttl.time_characteristic is TtlTimeCharacteristic.EventTime:
        return None if watermark is None else watermark - meta.ttl.ttl_ms
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return now - meta.ttl.ttl_ms
