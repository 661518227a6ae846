"""A snapshot's recorded changes as plain sets, for the change-recording tests of every backend
(``keyed/test_changes.py``, the contract) and RocksDB's own (``rocksdb/test_rocksdb_changes.py``)."""

from __future__ import annotations

from typing import Any

from flinkstate.state.keyed.snapshot import KeyedStateSnapshot, StateColumns


def changes(snap: KeyedStateSnapshot, name: str) -> tuple[dict[Any, Any], set[Any]]:
    """(upserted (key, namespace) -> value, deleted (key, namespace)) of ``name`` in ``snap``."""
    assert snap.changes is not None
    upserts: dict[Any, Any] = {}
    deletes: set[Any] = set()
    start = snap.key_group_range.start
    for kg in snap.key_group_range:
        ids = snap.changes.changed(name, kg - start)
        if not ids:
            continue
        entries = snap.states[name].changed_entries(kg, ids)
        deletes |= set(_scopes(entries.deletes))
        upserts |= dict(zip(_scopes(entries.upserts), entries.upserts.values, strict=True))
    return upserts, deletes


def _scopes(cols: StateColumns) -> list[tuple[Any, Any]]:
    return list(zip(cols.keys, cols.namespaces or [None] * len(cols), strict=True))
