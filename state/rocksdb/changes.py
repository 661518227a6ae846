"""Change recording on RocksDB (incremental checkpoints; see :mod:`flinkstate.state.keyed.changes`).

A recording :class:`~.column.StateColumn` appends the RocksDB key of every entry it
writes or deletes to one list (one append on the per-record path, no key-group lookup);
when the list grows past ``FOLD_AT`` entries, or past twice the scopes kept, it is folded
into a set of scope prefixes (``key group | key | namespace``), so hot keys and long
lists cost bounded memory, and most keys of a run of distinct ones are only deduplicated
by the checkpoint's asynchronous part. Taking
the record hands both over as a :class:`ColumnChanges`, which sorts the prefixes into
key groups only when the checkpoint's asynchronous part first asks; there each prefix is
looked up in the snapshot's pinned iterator (:func:`resolve`): found, it is an upsert of
the scope's state as of the snapshot; gone, a delete.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any, overload

FOLD_AT = 1 << 16
"""The raw key list of a column is folded when it grows past this (or past twice the scopes kept)."""

PrefixLen = Callable[[bytes], int]
ScopesOf = Callable[[Iterable[bytes]], Iterable[bytes]]
"""The scope prefixes of entry keys (see :meth:`.layout.Layout.scopes`)."""


def fold(raw: list[bytes], scopes: set[bytes], scopes_of: ScopesOf) -> int:
    """Move the entry keys of ``raw`` into ``scopes`` as scope prefixes; empty ``raw``.
    Return the length of ``raw`` past which to fold again."""
    scopes.update(scopes_of(raw))
    raw.clear()
    return max(FOLD_AT, 2 * len(scopes))


class ColumnChanges(Sequence[set[bytes]]):
    """One column's changes of one epoch: per key-group index, the changed scope prefixes."""

    def __init__(self, raw: list[bytes], scopes: set[bytes], scopes_of: ScopesOf, width: int,
                 kg_start: int, kg_count: int) -> None:  # fmt: skip
        self._raw = raw
        self._scopes = scopes
        self._scopes_of = scopes_of
        self._width = width
        self._kg_start = kg_start
        self._count = kg_count
        self._groups: list[set[bytes]] | None = None
        self._lock = threading.Lock()

    def _split(self) -> list[set[bytes]]:
        with self._lock:
            if self._groups is None:
                fold(self._raw, self._scopes, self._scopes_of)
                groups: list[set[bytes]] = [set() for _ in range(self._count)]
                start, width = self._kg_start, self._width
                for prefix in self._scopes:
                    kg = prefix[0] if width == 1 else int.from_bytes(prefix[:width], "big")
                    groups[kg - start].add(prefix)
                self._groups = groups
                self._scopes = set()
            return self._groups

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> set[bytes]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[set[bytes]]: ...

    def __getitem__(self, index: int | slice) -> set[bytes] | Sequence[set[bytes]]:
        return self._split()[index]


Found = list[tuple[bytes, list[tuple[bytes, bytes]]]]


def resolve(iterator: Any, prefixes: Collection[bytes], single: bool) -> tuple[Found, list[bytes]]:
    """(every prefix found in ``iterator`` with its entries, the prefixes not found), in key
    order. ``single``: a scope is one entry, its key the prefix itself."""
    found: Found = []
    gone: list[bytes] = []
    seek, valid, key, value, step = iterator.seek, iterator.valid, iterator.key, iterator.value, iterator.next
    for prefix in sorted(prefixes):
        seek(prefix)
        if single:
            if valid() and key() == prefix:
                found.append((prefix, [(prefix, value())]))
            else:
                gone.append(prefix)
            continue
        entries = []
        while valid():
            k = key()
            if not k.startswith(prefix):
                break
            entries.append((k, value()))
            step()
        if entries:
            found.append((prefix, entries))
        else:
            gone.append(prefix)
    return found, gone


def range_scopes(entries: Iterator[tuple[bytes, bytes]], end: bytes, prefix_len: PrefixLen) -> set[bytes]:
    """The scope prefixes of ``entries`` (in key order) below ``end``."""
    out: set[bytes] = set()
    current = b"\xff"  # no key starts with it before the first entry is seen
    for key, _ in entries:
        if key >= end:
            break
        if not key.startswith(current):
            current = key[: prefix_len(key)]
            out.add(current)
    return out
