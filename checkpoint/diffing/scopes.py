"""The one rule of a difference between two sets of rows of a state, per scope.

A scope is what one state entry is addressed by: (key, namespace) of keyed state (by Flink's
rule, :func:`~flinkstate.state.types.canonical.key_token`: floats by bits, one NaN), the key of
a broadcast map. A scope only in ``old`` is deleted; one only in ``new``, or with other rows
there, is upserted, after a delete of the whole scope for a LIST or MAP (its rows are rewritten
whole). Rows compare by every column but ``key_group``, ``op`` and the ``ignored`` ones (a TTL
timestamp, unless asked). Operator list state has no scope: its elements compare as multisets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flinkstate.state.descriptors import StateKind
from flinkstate.state.types.canonical import key_token

_NOT_COMPARED = ("key_group", "op")


@dataclass(frozen=True)
class ScopeDiff:
    """``deletes``: one row (of ``old``) per scope to delete; ``upserts``: the rows (of ``new``) to
    write after them; applied to ``old`` they give ``new``. ``added``, ``removed``, ``changed``:
    how many scopes (or list elements) each."""

    deletes: pa.Table | None
    upserts: pa.Table | None
    added: int
    removed: int
    changed: int

    @property
    def empty(self) -> bool:
        return self.deletes is None and self.upserts is None


def _scopes(table: pa.Table | None, ignored: Collection[str]) -> dict[Any, tuple[list[int], list[str]]]:
    """Scope -> (its row indexes, its rows as sorted comparable text)."""
    if table is None:
        return {}
    names = [c for c in table.column_names if c not in _NOT_COMPARED and c not in ignored]
    scope = [c for c in ("key", "namespace") if c in names]
    out: dict[Any, tuple[list[int], list[str]]] = {}
    for i, row in enumerate(table.select(names).to_pylist()):
        rows, texts = out.setdefault(key_token([row[c] for c in scope]), ([], []))
        rows.append(i)
        texts.append(repr([row[c] for c in names]))
    for _, texts in out.values():
        texts.sort()
    return out


def _take(table: pa.Table | None, rows: list[int]) -> pa.Table | None:
    return None if table is None or not rows else table.take(pa.array(rows, pa.int64()))


def scope_diff(
    old: pa.Table | None, new: pa.Table | None, kind: StateKind, ignored: Collection[str] = ()
) -> ScopeDiff:
    """The difference of ``new`` from ``old`` (rows of one state, any number of key groups)."""
    whole = kind in (StateKind.LIST, StateKind.MAP)
    before, after = _scopes(old, ignored), _scopes(new, ignored)
    deleted: list[int] = []
    upserted: list[int] = []
    counts = Counter[str]()
    for scope, (rows, texts) in before.items():
        now = after.get(scope)
        if now is None:
            counts["removed"] += 1
            deleted.append(rows[0])
        elif now[1] != texts:
            counts["changed"] += 1
            if whole:
                deleted.append(rows[0])
    for scope, (rows, texts) in after.items():
        was = before.get(scope)
        if was is None or was[1] != texts:
            counts["added"] += was is None
            upserted.extend(rows)
    return ScopeDiff(_take(old, deleted), _take(new, upserted),
                     counts["added"], counts["removed"], counts["changed"])  # fmt: skip


def element_diff(old: pa.Table | None, new: pa.Table | None) -> ScopeDiff:
    """Operator list (or union) state: the elements of ``old`` not in ``new`` (as many times as
    they are missing) are deleted, those of ``new`` not in ``old`` added; ``subtask`` and
    ``position`` are where an element is, not what it is (a restore redistributes them)."""

    def texts(table: pa.Table | None) -> list[str]:
        return [] if table is None else [repr(v) for v in table.column("value").to_pylist()]

    before, after = texts(old), texts(new)
    missing, extra = Counter(before) - Counter(after), Counter(after) - Counter(before)

    def pick(values: list[str], wanted: Counter[str]) -> list[int]:
        out = []
        for i, text in enumerate(values):
            if wanted[text] > 0:
                wanted[text] -= 1
                out.append(i)
        return out

    deleted, added = pick(before, missing), pick(after, extra)
    return ScopeDiff(_take(old, deleted), _take(new, added), len(added), len(deleted), 0)
