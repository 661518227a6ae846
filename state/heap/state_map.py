"""The interface of a heap state map: the (key, namespace) -> state entries of one key group."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

from ..interfaces import StoredEntry

_tables: ModuleType | None
try:
    from . import _tables
except ImportError:  # the C accelerator is optional
    _tables = None

Entry = StoredEntry

CopyFn = Callable[[Any], Any]


def compose(key: Any, namespace: Any) -> Any:
    """The composite key of (key, namespace): the key alone when the namespace is void and
    the key is not a plain tuple, else the pair (the copy-on-write map's storage key)."""
    return key if namespace is None and type(key) is not tuple else (key, namespace)


def decompose(ck: Any) -> tuple[Any, Any]:
    return (ck[0], ck[1]) if type(ck) is tuple else (ck, None)


_EMPTY: dict[Any, Any] = {}
Buckets = list[dict[Any, Any] | None]
Resolved = tuple[list[Any], list[Any], list[Any]]


def int64_items(tables: list[list[dict[Any, Any] | None]]) -> tuple[bytes, bytes] | None:
    """The keys and values of dict buckets as native int64 buffers, in iteration order, by
    the C accelerator; ``None`` when it is not built or an entry is not a plain int in
    int64 range."""
    return None if _tables is None else _tables.int64_items(tables)


def untrack(lst: list[Any]) -> list[Any]:
    """``lst``, no longer tracked by the cyclic garbage collector (so a collection never walks
    it) when the C accelerator is built, else as it is. Only for a list that can be in no
    reference cycle: every item untracked by the collector (None, ints, or dicts it does not
    track) until :func:`track` is called, as it must be when a tracked object goes in."""
    return lst if _tables is None else _tables.untrack(lst)


def track(lst: list[Any]) -> None:
    """Have the cyclic garbage collector track ``lst`` again (a no-op when it does)."""
    if _tables is not None:
        _tables.track(lst)


def resolve_in_table(table: Buckets, ids: list[Any]) -> Resolved:
    """(ids found, their states, ids missing) in the order of ``ids``, each looked up in its
    bucket ``table[hash(id) % len(table)]``; a stored ``None`` counts as missing. The C
    accelerator does the lookups when it is built."""
    if _tables is not None:
        resolved: Resolved = _tables.resolve_in_table(table, ids)
        return resolved
    return resolve_in_table_py(table, ids)


def resolve_in_table_py(table: Buckets, ids: list[Any]) -> Resolved:
    """:func:`resolve_in_table` in Python (the fallback, and the model of the C version)."""
    n = len(table)
    got = list(map(dict.get, [table[hash(ck) % n] or _EMPTY for ck in ids], ids))
    missing = [ck for ck, state in zip(ids, got, strict=True) if state is None]
    if not missing:
        return ids, got, []
    found = [ck for ck, state in zip(ids, got, strict=True) if state is not None]
    return found, [state for state in got if state is not None], missing


def spread(
    bucket: dict[Any, Any], table: Buckets, versions: list[int], hints: list[Any], version: int
) -> None:
    """Put every entry of ``bucket`` into bucket ``table[hash(key) % len(table)]``: a new
    dict where that slot is empty (its version set to ``version``), and the slot's hint
    reset. Every hash is taken, and every target checked, before the first entry moves; a
    bucket changed meanwhile (by a key's ``__hash__``) is a ``RuntimeError``. By the C
    accelerator when it is built (it fetches the memory each move touches ahead of the
    move)."""
    if _tables is not None:
        _tables.spread(bucket, table, versions, hints, version)
    else:
        spread_py(bucket, table, versions, hints, version)


def spread_py(
    bucket: dict[Any, Any], table: Buckets, versions: list[int], hints: list[Any], version: int
) -> None:
    """:func:`spread` in Python (the fallback, and the model of the C version)."""
    n = len(table)
    if n == 0 or len(versions) != n or len(hints) != n:
        raise ValueError("table, versions and hints must have one equal, non-zero size")
    moves = [(hash(ck) % n, ck, state) for ck, state in bucket.items()]  # nothing moves if one fails
    if any(table[j] is not None and type(table[j]) is not dict for j, _, _ in moves):
        raise TypeError("a bucket is neither a dict nor None")
    for j, ck, state in moves:
        target = table[j]
        if target is None:
            target = table[j] = {}
            versions[j] = version
        hints[j] = None
        target[ck] = state


def split_known(recorded: dict[Any, Any], absent: Any) -> Resolved:
    """(ids recorded with a state, those states, ids recorded with ``absent``) of a record
    of id -> state, in its order (by the C accelerator when it is built)."""
    if _tables is not None:
        split: Resolved = _tables.split_known(recorded, absent)
        return split
    return split_known_py(recorded, absent)


def split_known_py(recorded: dict[Any, Any], absent: Any) -> Resolved:
    """:func:`split_known` in Python (the fallback, and the model of the C version)."""
    others = [ck for ck, state in recorded.items() if state is absent]
    if not others:
        return list(recorded), list(recorded.values()), []
    known = [(ck, state) for ck, state in recorded.items() if state is not absent]
    return [ck for ck, _ in known], [state for _, state in known], others


class StateMapSnapshot(ABC):
    """A map's entries as of one moment; unaffected by later writes until released."""

    @abstractmethod
    def entries(self) -> Iterator[Entry]: ...

    @abstractmethod
    def raw_columns(self, composite: bool) -> tuple[list[Any], list[Any] | None, list[Any]]:
        """(keys, namespaces or None when all void, states); ``composite``: keys may be
        tuples or namespaces non-void (otherwise a C-speed path is taken)."""

    def int64_items(self) -> tuple[bytes, bytes] | None:
        """Stored keys and values as native int64 buffers, in :meth:`raw_columns` order,
        when all are plain ints in int64 range and the C accelerator is built; else None."""
        return None

    @abstractmethod
    def resolve(self, cks: Iterable[Any]) -> tuple[list[Any], list[Any], list[Any]]:
        """Composite keys (see :func:`compose`) as of the snapshot: (those present, their
        states, those absent)."""

    @abstractmethod
    def release(self) -> None:
        """Free what the snapshot holds; the map stops copying on its behalf."""


class StateMap(ABC):
    """(key, namespace) -> state. ``None`` is never stored: it means absent.

    When constructed with a ``copy_state`` function, a state returned by :meth:`get` may
    be mutated in place: it is never shared with a snapshot.

    ``fast_table`` is an optional shortcut for the hottest path: when not ``None`` it is
    a list of dict buckets, and the state of a non-tuple key in the void namespace is
    ``fast_table[hash(key) % len(fast_table)][key]``; reading it, or replacing an
    existing entry in place, needs no other bookkeeping than this: when the bucket written
    is then tracked by the cyclic garbage collector and the table is not, :func:`track`
    the table (see :mod:`.cow_map`).
    """

    fast_table: list[dict[Any, Any] | None] | None = None

    @abstractmethod
    def get(self, key: Any, namespace: Any) -> Any: ...

    @abstractmethod
    def put(self, key: Any, namespace: Any, state: Any) -> None: ...

    @abstractmethod
    def remove(self, key: Any, namespace: Any) -> Any:
        """Remove the entry; return its state or ``None``."""

    @abstractmethod
    def contains(self, key: Any, namespace: Any) -> bool: ...

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def entries(self) -> Iterator[Entry]:
        """Live entries; the map must not be modified while iterating."""

    @abstractmethod
    def keys(self, namespace: Any) -> list[Any]:
        """The keys with state in ``namespace``, as a list (safe to modify the map after)."""

    @abstractmethod
    def snapshot(self) -> StateMapSnapshot: ...

    @abstractmethod
    def cursor(self) -> MapCursor:
        """A resumable walk over the entries, tolerant of writes between steps."""

    def reserve(self, count: int) -> None:
        """Make room for ``count`` entries about to be put (a restore); a map that needs
        no room, or already holds entries, ignores it."""
        return None

    def set_copy_state(self, copy_state: CopyFn | None) -> None:
        """Change how mutable states are copied (a restored state got its new type)."""
        self._copy = copy_state

    _copy: CopyFn | None

    def reset_hints(self) -> None:
        """Forget the hints cursors left on buckets (maps without hints have none)."""
        return None


class MapCursor(ABC):
    """Walks a map in small steps (for incremental TTL cleanup); restarts when done.

    A batch is a list of ``(handle, state)`` pairs, cheap to make; a handle stands for
    an entry until the next batch. Between steps the map may change: entries written
    after the walk began may be visited or not, but every entry present for a whole pass
    is visited in that pass.
    """

    @abstractmethod
    def next_batch(self) -> list[tuple[Any, Any]]:
        """The next few entries (empty at the end of a pass; the next call restarts)."""

    @abstractmethod
    def entry(self, handle: Any) -> tuple[Any, Any]:
        """The (key, namespace) of an entry of the last batch."""

    def skip(self, fresh_after: Any) -> int:
        """Pass over the next buckets whose hint is above ``fresh_after``; return their size."""
        return 0

    def set_hint(self, hint: Any) -> None:
        """Annotate the bucket of the last batch (maps without hints ignore it)."""
        return None

    def remove(self, handle: Any) -> None:
        """Remove an entry of the last batch."""
        self._map.remove(*self.entry(handle))

    def update(self, handle: Any, state: Any) -> None:
        """Replace the state of an entry of the last batch."""
        self._map.put(*self.entry(handle), state)

    _map: StateMap
