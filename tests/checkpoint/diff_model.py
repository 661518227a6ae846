"""The model of a snapshot diff: each side's state as read whole by the plain reader, as Python
dicts (scope -> entries), compared as dicts, and change rows applied to the old side's dict.

A second implementation of :mod:`flinkstate.checkpoint.diffing`: no per-unit streaming, no
skipped files, no residues; keys by Flink's rule (:func:`key_token`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from flinkstate.checkpoint import CompletedCheckpoint, expiry_cutoff, key_group_rows, open_checkpoint
from flinkstate.checkpoint.flink import FlinkSavepoint
from flinkstate.state.types import key_token

Contents = dict[Any, Any]
"""Scope (key, namespace) -> value, list of elements or dict of map entries."""


def read_whole(
    path: str,
    uid: str,
    state: str,
    include_expired: bool = False,
    storage_options: dict[str, Any] | None = None,
    checkpoint_id: int | None = None,
) -> pa.Table:
    """The state's flattened view rows, as the plain reader gives them (every key group at once)."""
    opened = open_checkpoint(path, storage_options, checkpoint_id)
    if isinstance(opened, FlinkSavepoint):
        return opened.keyed_state(uid, state)
    assert isinstance(opened, CompletedCheckpoint)
    op = opened.operator(uid)
    meta = op.keyed_state(state)
    assert meta is not None
    cutoff = None if include_expired else expiry_cutoff(meta, opened.manifest.watermark(uid))
    tables = [
        key_group_rows(t, kg, meta, op.key_type, expired_before=cutoff, allow_pickle=False)
        for kg, t in opened.read_keyed(uid, state)
    ]
    found = [t for t in tables if t is not None]
    return pa.concat_tables(found) if found else pa.table({})


def contents(rows: Iterable[dict[str, Any]], compare_ttl: bool = False) -> Contents:
    """View rows as scope -> entries (a value with its TTL timestamp when ``compare_ttl``)."""
    out: Contents = {}
    for row in sorted(rows, key=lambda r: r.get("position") or 0):
        scope = (key_token(row["key"]), key_token(row["namespace"]))
        value = (row["value"], row.get("ttl_timestamp")) if compare_ttl else row["value"]
        value = repr(value)
        if "user_key" in row:
            out.setdefault(scope, {})[repr(row["user_key"])] = value
        elif "position" in row:
            out.setdefault(scope, []).append(value)
        else:
            out[scope] = value
    return out


def expected_counts(old: Contents, new: Contents) -> tuple[int, int, int]:
    """(added, removed, changed) scopes, by a dict comparison."""
    changed = sum(1 for s in old.keys() & new.keys() if old[s] != new[s])
    return len(new.keys() - old.keys()), len(old.keys() - new.keys()), changed


def applied(old: Contents, changes: Iterable[dict[str, Any]], compare_ttl: bool = False) -> Contents:
    """``old`` with change rows applied: deletes first, then each scope's updates (a LIST or
    MAP scope's updates are all its entries, after a delete of it)."""
    rows = list(changes)
    out = dict(old)
    for row in rows:
        if row["change_type"] == "delete":
            out.pop((key_token(row["key"]), key_token(row["namespace"])), None)
    updates = [r for r in rows if r["change_type"] == "update"]
    for scope, entries in contents(updates, compare_ttl).items():
        kept = out.get(scope)  # a LIST or MAP scope not deleted first is added to, as a feed's
        if isinstance(entries, dict) and isinstance(kept, dict):
            entries = {**kept, **entries}
        elif isinstance(entries, list) and isinstance(kept, list):
            entries = kept + entries
        out[scope] = entries
    return out
