"""Change-feed rows of delta rows that do not read as deletes then updates.

A live backend's delta holds, per key group, deletes and then the new values, a changed
LIST or MAP written whole after a delete of its scope. The streaming sink's increments
may instead append to a list, delete one entry of a map, null a value, or touch a scope
in several files (Spark tasks). Read as deletes then updates, such rows do not give the
state after them, so each scope they touch is rewritten from the state at the checkpoint
(the chain merged): a ``delete`` (a VALUE only when it is gone), then its entries.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.checkpoint import DELETE
from flinkstate.state import StateKind, StateMetaInfo
from flinkstate.state.types import key_token

_SCOPE_COLUMNS = ("key_group", "key", "namespace")


def _scopes(table: pa.Table) -> list[Any]:
    """Each row's scope (key, namespace), equal when it is the same scope by Flink's rule
    (:func:`~flinkstate.state.types.canonical.key_token`: floats by bits, one NaN)."""
    keys = table.column("key").to_pylist()
    spaces = table.column("namespace").to_pylist() if "namespace" in table.column_names else None
    if spaces is None:
        return [key_token(k) for k in keys]
    return [key_token((k, s)) for k, s in zip(keys, spaces, strict=True)]


def _deleted(table: pa.Table) -> np.ndarray[Any, np.dtype[np.bool_]]:
    if "op" not in table.column_names:
        return np.zeros(table.num_rows, dtype=bool)
    ops = pc.fill_null(pc.equal(table.column("op"), pa.scalar(DELETE, pa.int8())), False)
    return np.asarray(ops.to_numpy(zero_copy_only=False), dtype=bool)


def deletes_then_updates(tables: list[pa.Table], meta: StateMetaInfo) -> bool:
    """Whether one key group's delta tables, read as all deletes then all updates, give the
    state they lead to: no scope in two tables, deletes before updates, no empty update,
    no map-entry delete, and every list update after a delete of its scope."""
    seen: set[Any] = set()
    for table in tables:
        deleted = _deleted(table)
        if bool((deleted[1:] & ~deleted[:-1]).any()):
            return False
        updates = pc.invert(pa.array(deleted))
        value = table.column("value")
        if meta.kind is StateKind.MAP:
            entry = pc.and_(pa.array(deleted), pc.is_valid(table.column("user_key")))
            if pc.any(entry).as_py():
                return False
        else:
            empty = pc.is_null(value)
            if meta.kind is StateKind.LIST:
                empty = pc.or_(empty, pc.fill_null(pc.equal(pc.list_value_length(value), 0), True))
            if pc.any(pc.and_(updates, empty)).as_py():
                return False
        if len(tables) > 1 or meta.kind is StateKind.LIST:
            scopes = _scopes(table)
            mine = set(scopes)
            if mine & seen:
                return False
            seen |= mine
            if meta.kind is StateKind.LIST:
                dropped = {s for s, d in zip(scopes, deleted, strict=True) if d}
                if any(s not in dropped for s, d in zip(scopes, deleted, strict=True) if not d):
                    return False
    return True


def rewritten(
    tables: list[pa.Table], now: pa.Table | None, meta: StateMetaInfo
) -> tuple[pa.Table | None, pa.Table | None]:
    """(the deletes, the updates) for the scopes ``tables`` touch, from ``now``: the key
    group's stored rows at the checkpoint. A LIST or MAP scope is deleted and rewritten;
    a VALUE scope is deleted only when it is gone."""
    firsts: dict[Any, tuple[int, int]] = {}
    for t, table in enumerate(tables):
        for i, scope in enumerate(_scopes(table)):
            firsts.setdefault(scope, (t, i))
    present = _scopes(now) if now is not None else []
    kept = [i for i, scope in enumerate(present) if scope in firsts]
    gone = firsts if meta.kind in (StateKind.LIST, StateKind.MAP) else firsts.keys() - set(present)
    parts = []
    for t, table in enumerate(tables):
        rows = [i for scope, (u, i) in firsts.items() if u == t and scope in gone]
        if rows:
            names = [c for c in _SCOPE_COLUMNS if c in table.column_names]
            parts.append(table.select(names).take(pa.array(rows, pa.int64())))
    deletes = pa.concat_tables(parts) if parts else None
    updates = now.take(pa.array(kept, pa.int64())) if now is not None and kept else None
    return deletes, updates
