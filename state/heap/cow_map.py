"""A hash map with incremental rehash and copy-on-write snapshots (Flink's CopyOnWriteStateMap).

Entries live in buckets: plain dicts in a table indexed by ``hash % table size``, with a
parallel list of bucket versions. When the map grows past its threshold a rehash table
about twice as large is allocated and every later access migrates one bucket into it
(``rehash_index`` marks progress), so no single operation pays for resizing the whole
map. A snapshot copies the bucket tables (one pointer per bucket) and raises the
required version: a bucket older than that is copied before it is written (and, for
mutable states, before a state is handed out), so the snapshot's view stays exactly as
it was. Releasing the snapshot lowers the required version again.

Buckets are plain dicts so that, holding only atomic keys and values, they are not
tracked by Python's cyclic garbage collector: a large map adds no GC pauses. Nor do the
lists of buckets, versions and hints, untracked by the C accelerator (a collection walks
every bucket of a table it reaches, and the young ones a rehash's new buckets trigger walk
its new table): no cycle runs through them while no bucket is tracked, and whoever puts a
tracked object in a bucket (a container state, a tuple key) tracks both tables again.

A key is stored alone when its namespace is void and it is not a plain tuple, else as
``(key, namespace)``. Every test of that is ``type(key) is tuple`` (here and in the value
state's fast path); the backend hands over ROW keys as plain tuples (never subclasses).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from gc import is_tracked
from typing import Any

from .state_map import (
    Buckets,
    CopyFn,
    Entry,
    MapCursor,
    StateMap,
    StateMapSnapshot,
    compose,
    decompose,
    int64_items,
    resolve_in_table,
    spread,
    track,
    untrack,
)

# Bucket table sizes: primes just below powers of two, so strided int keys spread well.
_SIZES = (
    1, 3, 7, 13, 31, 61, 127, 251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521,
    131071, 262139, 524287, 1048573, 2097143, 4194301, 8388593, 16777213, 33554393,
    67108859, 134217689, 268435399, 536870909, 1073741789, 2147483647,
)  # fmt: skip
BUCKET_LOAD = 128
"""Average entries per bucket at which the table grows."""


def _next_size(n: int) -> int:
    for size in _SIZES:
        if size > n:
            return size
    return n


class CopyOnWriteStateMap(StateMap):
    """See the module docstring. ``copy_state`` copies a mutable state (``None``: immutable)."""

    __slots__ = (
        "_copy", "_tab", "_ver", "_hint", "_n", "_new", "_new_ver", "_new_hint", "_new_n", "_rehash_index",
        "_size", "_threshold", "_version", "_required", "_snapshots", "fast_table",
    )  # fmt: skip

    def __init__(self, copy_state: CopyFn | None = None) -> None:
        self._copy = copy_state
        self._tab: Buckets = untrack([None])
        self._ver = untrack([0])
        self._hint: list[Any] = untrack([None])
        self._n = 1
        self._new: Buckets | None = None
        self._new_ver: list[int] = []
        self._new_hint: list[Any] = []
        self._new_n = 0
        self._rehash_index = 0
        self._size = 0
        self._threshold = BUCKET_LOAD
        self._version = 0
        self._required = 0
        self._snapshots: list[int] = []
        self.fast_table: Buckets | None = self._tab

    def _update_fast_table(self) -> None:
        quiet = self._new is None and self._required == 0
        self.fast_table = self._tab if quiet else None

    # -- lookups ---------------------------------------------------------------

    def _slot(self, h: int) -> tuple[Buckets, list[int], int]:
        i = h % self._n
        if self._new is not None and i < self._rehash_index:
            return self._new, self._new_ver, h % self._new_n
        return self._tab, self._ver, i

    def _own(self, table: Buckets, versions: list[int], i: int, bucket: dict[Any, Any]) -> dict[Any, Any]:
        """Replace a bucket shared with a snapshot by a private copy."""
        copy = self._copy
        owned = bucket.copy() if copy is None else {k: copy(v) for k, v in bucket.items()}
        table[i] = owned
        versions[i] = self._version
        if not is_tracked(table) and is_tracked(owned):
            self._track()
        return owned

    def _track(self) -> None:
        """A bucket holds a tracked object: so the collector tracks the bucket tables again."""
        track(self._tab)
        if self._new is not None:
            track(self._new)

    def get(self, key: Any, namespace: Any) -> Any:
        ck = key if namespace is None and type(key) is not tuple else (key, namespace)
        if self._new is not None:
            self._migrate()
            table, versions, i = self._slot(hash(ck))
        else:
            table, versions, i = self._tab, self._ver, hash(ck) % self._n
        bucket = table[i]
        if bucket is None:
            return None
        if self._copy is not None and versions[i] < self._required:
            bucket = self._own(table, versions, i, bucket)
        return bucket.get(ck)

    def put(self, key: Any, namespace: Any, state: Any) -> None:
        ck = key if namespace is None and type(key) is not tuple else (key, namespace)
        if self._new is not None:
            self._migrate()
            table, versions, i = self._slot(hash(ck))
        else:
            table, versions, i = self._tab, self._ver, hash(ck) % self._n
        bucket = table[i]
        if bucket is None:
            bucket = table[i] = {}
            versions[i] = self._version
        elif versions[i] < self._required:
            bucket = self._own(table, versions, i, bucket)
        added = ck not in bucket
        bucket[ck] = state
        if not is_tracked(table) and is_tracked(bucket):
            self._track()
        if added:
            self._size += 1
            if self._size > self._threshold and self._new is None:
                self._start_rehash()

    def remove(self, key: Any, namespace: Any) -> Any:
        ck = compose(key, namespace)
        if self._new is not None:
            self._migrate()
        table, versions, i = self._slot(hash(ck))
        bucket = table[i]
        if bucket is None or ck not in bucket:
            return None
        if versions[i] < self._required:
            bucket = self._own(table, versions, i, bucket)
        self._size -= 1
        return bucket.pop(ck)

    def contains(self, key: Any, namespace: Any) -> bool:
        ck = compose(key, namespace)
        if self._new is not None:
            self._migrate()
        table, _, i = self._slot(hash(ck))
        bucket = table[i]
        return bucket is not None and ck in bucket

    def __len__(self) -> int:
        return self._size

    def reserve(self, count: int) -> None:
        """Size an empty map's table for ``count`` entries: putting them starts no rehash."""
        size = _next_size(count // BUCKET_LOAD)
        if self._size == 0 and self._new is None and size > self._n:
            self._tab, self._ver, self._hint = (untrack([fill] * size) for fill in (None, 0, None))
            self._n, self._threshold = size, size * BUCKET_LOAD
            self._update_fast_table()

    # -- incremental rehash ------------------------------------------------------

    @property
    def is_rehashing(self) -> bool:
        return self._new is not None

    @property
    def table_sizes(self) -> tuple[int, int]:
        """(primary table size, rehash table size or 0)."""
        return self._n, self._new_n if self._new is not None else 0

    def _start_rehash(self) -> None:
        n = self._new_n = _next_size(self._n * 2)
        self._new = [None] * n if is_tracked(self._tab) else untrack([None] * n)
        self._new_ver, self._new_hint = untrack([0] * n), untrack([None] * n)
        self._rehash_index = 0
        self.fast_table = None

    def _migrate(self) -> None:
        """Move one bucket of the primary table into the rehash table (it leaves the
        primary table once all its entries have moved: a failed move loses none)."""
        assert self._new is not None
        i = self._rehash_index
        bucket = self._tab[i]
        if bucket is not None:
            if self._required == 0:  # no snapshot shares a bucket
                spread(bucket, self._new, self._new_ver, self._new_hint, self._version)
            else:
                self._spread_shared(bucket, self._ver[i])
            self._tab[i] = None
        i += 1
        if i < self._n:
            self._rehash_index = i
        else:
            self._tab, self._ver, self._hint, self._n = self._new, self._new_ver, self._new_hint, self._new_n
            self._new, self._new_ver, self._new_hint = None, [], []
            self._new_n, self._rehash_index = 0, 0
            self._threshold = self._n * BUCKET_LOAD
            self._update_fast_table()

    def _spread_shared(self, bucket: dict[Any, Any], version: int) -> None:
        """:func:`spread` while snapshots are live: a target shared with a snapshot is
        copied before it is written, and moved states stay shared with a snapshot that
        holds the old bucket (for mutable states the target keeps the older version, so
        it is copied on use)."""
        new, new_ver, new_hint = self._new, self._new_ver, self._new_hint
        assert new is not None
        shared = self._copy is not None and version < self._required
        required, nn = self._required, self._new_n
        for ck, state in bucket.items():
            j = hash(ck) % nn
            target = new[j]
            if target is None:
                target = new[j] = {}
                new_ver[j] = self._version
            elif new_ver[j] < required:
                target = self._own(new, new_ver, j, target)
            if shared and version < new_ver[j]:
                new_ver[j] = version
            new_hint[j] = None
            target[ck] = state

    # -- iteration and snapshots -----------------------------------------------

    def _tables(self) -> list[Buckets]:
        return [self._tab] if self._new is None else [self._tab, self._new]

    def entries(self) -> Iterator[Entry]:
        return _entries(self._tables())

    def keys(self, namespace: Any) -> list[Any]:
        tables = self._tables()
        if namespace is None:
            return [ck[0] if type(ck) is tuple else ck for t in tables for b in t if b for ck in b
                    if type(ck) is not tuple or ck[1] is None]  # fmt: skip
        return [ck[0] for t in tables for b in t if b for ck in b
                if type(ck) is tuple and ck[1] == namespace]  # fmt: skip

    def snapshot(self) -> StateMapSnapshot:
        self._version += 1
        self._required = self._version
        self._snapshots.append(self._version)
        self.fast_table = None
        return _CowSnapshot(self, self._version, [t.copy() for t in self._tables()])

    def _release(self, version: int) -> None:
        self._snapshots.remove(version)
        self._required = max(self._snapshots, default=0)
        self._update_fast_table()

    def cursor(self) -> MapCursor:
        return _CowCursor(self)

    def reset_hints(self) -> None:
        self._hint[:] = [None] * len(self._hint)
        self._new_hint[:] = [None] * len(self._new_hint)


def _entries(tables: list[Buckets]) -> Iterator[Entry]:
    for table in tables:
        for bucket in table:
            if bucket:
                for ck, state in bucket.items():
                    key, ns = decompose(ck)
                    yield key, ns, state


def _lookup(tables: list[Buckets], ck: Any) -> Any:
    h = hash(ck)
    for table in tables:
        bucket = table[h % len(table)]
        if bucket is not None and ck in bucket:
            return bucket[ck]
    return None


class _CowSnapshot(StateMapSnapshot):
    __slots__ = ("_map", "_version", "_tables")

    def __init__(self, owner: CopyOnWriteStateMap, version: int, tables: list[Buckets]) -> None:
        self._map: CopyOnWriteStateMap | None = owner
        self._version = version
        self._tables = tables

    def entries(self) -> Iterator[Entry]:
        return _entries(self._tables)

    def raw_columns(self, composite: bool) -> tuple[list[Any], list[Any] | None, list[Any]]:
        keys: list[Any] = []
        states: list[Any] = []
        for table in self._tables:
            for bucket in table:
                if bucket:
                    keys.extend(bucket)
                    states.extend(bucket.values())
        if not composite:
            return keys, None, states
        pairs = [decompose(ck) for ck in keys]
        return [p[0] for p in pairs], [p[1] for p in pairs], states

    def int64_items(self) -> tuple[bytes, bytes] | None:
        return int64_items(self._tables)

    def resolve(self, cks: Iterable[Any]) -> tuple[list[Any], list[Any], list[Any]]:
        ids = list(cks)
        tables = self._tables
        if len(tables) == 1:  # no rehash under way: one bucket lookup per id
            return resolve_in_table(tables[0], ids)
        got = [_lookup(tables, ck) for ck in ids]  # an entry is in exactly one of the tables
        missing = [ck for ck, state in zip(ids, got, strict=True) if state is None]
        if not missing:
            return ids, got, []
        found = [ck for ck, state in zip(ids, got, strict=True) if state is not None]
        return found, [state for state in got if state is not None], missing

    def release(self) -> None:
        if self._map is not None:
            self._map._release(self._version)
            self._map = None
            self._tables = []


class _CowCursor(MapCursor):
    """Walks the primary table a bucket at a time, then the rehash target if any.

    Each bucket has a hint slot for the cursor's user (TTL cleanup keeps a lower bound of
    the bucket's timestamps there); it is reset when entries move between buckets.
    """

    __slots__ = ("_map", "_seen", "_table", "_hints", "_index")

    def __init__(self, owner: CopyOnWriteStateMap) -> None:
        self._map: CopyOnWriteStateMap = owner
        self._seen: list[Buckets] = []
        self._table: Buckets | None = None
        self._hints: list[Any] = []
        self._index = 0

    def _next_table(self) -> bool:
        """Move to the next table of this pass; ``False`` when the pass is over."""
        m = self._map
        if not self._seen:
            table, hints = m._tab, m._hint
        elif m._new is not None:
            table, hints = m._new, m._new_hint
        else:
            table, hints = m._tab, m._hint
        if any(table is t for t in self._seen):
            self._seen, self._table, self._index = [], None, 0
            return False
        self._seen.append(table)
        self._table, self._hints, self._index = table, hints, 0
        return True

    def next_batch(self) -> list[tuple[Any, Any]]:
        while True:
            table = self._table
            if table is None or self._index >= len(table):
                if not self._next_table():
                    return []
                continue
            bucket = table[self._index]
            self._index += 1
            if bucket:
                return list(bucket.items())

    def skip(self, fresh_after: Any) -> int:
        table, hints = self._table, self._hints
        skipped = 0
        if table is not None:
            i, n = self._index, len(table)
            while i < n:
                hint = hints[i]
                if hint is None or hint <= fresh_after:
                    break
                bucket = table[i]
                if bucket:
                    skipped += len(bucket)
                i += 1
            self._index = i
        return skipped

    def set_hint(self, hint: Any) -> None:
        if self._table is not None and self._index > 0:
            self._hints[self._index - 1] = hint
            if is_tracked(hint):
                track(self._hints)

    def entry(self, handle: Any) -> tuple[Any, Any]:
        return decompose(handle)
