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
from .column import StateColumn
from .layout import Entries

CHUNK = 131_072
"""Entries :meth:`RocksDBStateSnapshot.column_chunks` reads at a time (a scope is never cut):
a key group of a 10M-entry state at max parallelism 128 (78k entries) in one chunk, one of
a 100M-entry state (780k) in six, so what a checkpoint holds does not grow with the state."""


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

    def _scan(self, prefix: bytes, start: bytes, limit: int | None = None) -> tuple[list[bytes], list[bytes]]:
        """(keys, values) of the entries with ``prefix`` from key ``start`` on, at most
        ``limit`` of them: two lists of bytes, which the garbage collector does not track
        (a tuple per entry would be tracked, and a large key group's would make it scan
        them again and again)."""
        keys: list[bytes] = []
        values: list[bytes] = []
        with self._lock:
            it = self._iterator
            if it is None:
                raise StateAccessError("the snapshot was released", code="SNAPSHOT_RELEASED")
            it.seek(start)
            while it.valid() and len(keys) != limit:
                key = it.key()
                if not key.startswith(prefix):
                    break
                keys.append(key)
                values.append(it.value())
                it.next()
        return keys, values

    def _entries(self, prefix: bytes, start: bytes, limit: int | None = None) -> Entries:
        """:meth:`_scan` as (key, value) pairs."""
        return list(zip(*self._scan(prefix, start, limit), strict=True))

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

    def _decode_single(self, prefixes: list[bytes], values: list[bytes]) -> StateColumns:
        """Columns of a single-entry layout's entries: each entry is a scope, its key the
        scope's prefix and its value the state (no grouping)."""
        col = self._col
        split = col.split_prefix
        keys: list[Any] = []
        namespaces: list[Any] = []
        for prefix in prefixes:
            key, namespace = split(prefix)
            keys.append(key)
            namespaces.append(namespace)
        states = list(map(col.values.loads, values))
        typed = self.meta.namespace_type is not None
        return self._transform(keys, namespaces if typed else None, states)

    def columns(self, key_group: int) -> StateColumns:
        if key_group not in self._range:
            return StateColumns([], None, [])
        prefix = self._col.keys.absolute[key_group]
        if self._col.layout.single:
            return self._decode_single(*self._scan(prefix, prefix))
        return self._decode(self._col.groups(self._entries(prefix, prefix)))

    def column_chunks(self, key_group: int) -> Iterator[StateColumns]:
        """The key group read :data:`CHUNK` entries at a time, each chunk's scopes decoded
        before the next is read; a scope going on past a chunk is held for the next one."""
        if key_group not in self._range:
            return
        prefix = self._col.keys.absolute[key_group]
        if self._col.layout.single:
            yield from self._single_chunks(prefix)
            return
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

    def _single_chunks(self, prefix: bytes) -> Iterator[StateColumns]:
        """:meth:`column_chunks` of a single-entry layout: a chunk never cuts a scope."""
        start = prefix
        while True:
            keys, values = self._scan(prefix, start, CHUNK)
            if keys:
                yield self._decode_single(keys, values)
            if len(keys) < CHUNK:
                return
            start = keys[-1] + b"\x00"  # the next key in bytewise order

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
