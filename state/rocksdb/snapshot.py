"""Snapshots of RocksDB states: a pinned iterator per column family.

A RocksDB iterator reads the DB as of its creation (it holds an implicit snapshot of
the memtables and files), so one iterator per state, created synchronously, gives a
snapshot that stays consistent while writes go on; reading a key group is a seek to
its prefix and a scan. (Iterating a rocksdict ``Snapshot`` object would not honour it.)
A lock serializes readers of one state; ``release()`` drops the iterator, which the DB
needs before it can close.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import replace
from typing import Any

from ..errors import StateAccessError
from ..keyed.snapshot import ChangedEntries, ColumnTransform, StateColumns, StateSnapshot
from ..keygroups.assignment import KeyGroupRange
from .changes import resolve
from .column import Entries, StateColumn

CHUNK = 262_144
"""Entries :meth:`RocksDBStateSnapshot.column_chunks` reads at a time (a scope is never cut)."""


class RocksDBStateSnapshot(StateSnapshot):
    """One state's entries as of the snapshot, read key group by key group."""

    def __init__(
        self,
        column: StateColumn,
        key_group_range: KeyGroupRange,
        on_release: Callable[[RocksDBStateSnapshot], None],
    ) -> None:
        self.meta = replace(column.meta, namespace_type=column.namespaces.type)
        self._col = column
        self._range = key_group_range
        self._iterator: Any = column.view().iter()
        self._transform: ColumnTransform = column.transform_factory()
        self._lock = threading.Lock()
        self._on_release = on_release

    def _entries(self, prefix: bytes, start: bytes, limit: int | None = None) -> Entries:
        """Entries with ``prefix`` from key ``start`` on, at most ``limit`` of them."""
        out: Entries = []
        with self._lock:
            it = self._iterator
            if it is None:
                raise StateAccessError("the snapshot was released", code="SNAPSHOT_RELEASED")
            it.seek(start)
            while it.valid() and len(out) != limit:
                key = it.key()
                if not key.startswith(prefix):
                    break
                out.append((key, it.value()))
                it.next()
        return out

    def _decode(self, groups: Iterable[tuple[bytes, Entries]]) -> StateColumns:
        """Columns of scopes given as (prefix, their entries)."""
        col = self._col
        keys: list[Any] = []
        namespaces: list[Any] = []
        states: list[Any] = []
        decode = col.layout.decode
        for prefix, entries in groups:
            key, namespace = col.split_prefix(prefix)
            keys.append(key)
            namespaces.append(namespace)
            states.append(decode(col, prefix, entries))
        typed = self.meta.namespace_type is not None
        return self._transform(keys, namespaces if typed else None, states)

    def columns(self, key_group: int) -> StateColumns:
        if key_group not in self._range:
            return StateColumns([], None, [])
        prefix = self._col.keys.absolute[key_group]
        return self._decode(self._col.groups(self._entries(prefix, prefix)))

    def column_chunks(self, key_group: int) -> Iterator[StateColumns]:
        """The key group read :data:`CHUNK` entries at a time, each chunk's scopes decoded
        before the next is read; a scope going on past a chunk is held for the next one."""
        if key_group not in self._range:
            return
        prefix = self._col.keys.absolute[key_group]
        start = prefix
        held: Entries = []
        while True:
            read = self._entries(prefix, start, CHUNK)
            entries = held + read if held else read
            if len(read) < CHUNK:  # the key group's last chunk: decoded as it is grouped
                if entries:
                    yield self._decode(self._col.groups(entries))
                return
            start = read[-1][0] + b"\x00"  # the next key in bytewise order
            groups = list(self._col.groups(entries))
            held = groups.pop()[1]
            if groups:
                yield self._decode(groups)

    def changed_entries(self, key_group: int, ids: Collection[Any]) -> ChangedEntries:
        """``ids`` are scope prefixes (see :mod:`.changes`): each is looked up in the snapshot."""
        col = self._col
        with self._lock:
            if self._iterator is None:
                raise StateAccessError("the snapshot was released", code="SNAPSHOT_RELEASED")
            found, gone = resolve(self._iterator, ids, col.layout.single)
        upserts = self._decode(found)
        typed = self.meta.namespace_type is not None
        return ChangedEntries.of(self.meta, upserts, [col.split_prefix(p) for p in gone], typed)

    def release(self) -> None:
        with self._lock:
            if self._iterator is None:
                return
            self._iterator = None
        self._on_release(self)
