"""A state table: the entries of one state, one state map per key group of the backend."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import replace
from itertools import chain, islice
from typing import Any, overload

from ..errors import StateAccessError, StateTypeError
from ..interfaces import StateIncrementalVisitor
from ..keyed.snapshot import (
    Changed,
    ChangedEntries,
    ColumnTransform,
    Int64Columns,
    StateColumns,
    StateMetaInfo,
    StateSnapshot,
    plain_columns,
)
from ..keygroups.assignment import KeyGroupRange
from ..types.mapping import TypeInformation, as_inferred, infer_type
from .state_map import (
    CopyFn,
    Entry,
    MapCursor,
    StateMap,
    StateMapSnapshot,
    _tables,
    compose,
    decompose,
    split_known,
)

COMPACT_AT = 1 << 16
"""A change list drops its repeats when it grows past this (or past twice what it kept)."""


def compact(changed: list[Any]) -> int:
    """Drop the repeats of a change list of ``id, state`` pairs, in place, keeping each id's
    last state; return the length past which to do it again (at least twice what is left,
    so a list of many distinct ids is not compacted on every write). Tested with a length
    compare (no int is made, unlike a mask test)."""
    changed[:] = chain.from_iterable(recorded(changed).items())
    return max(COMPACT_AT, 2 * len(changed))


def recorded(changed: list[Any]) -> dict[Any, Any]:
    """A change list of ``id, state`` pairs as id -> its last recorded state (by the C
    accelerator when it is built)."""
    if _tables is not None:
        pairs: dict[Any, Any] = _tables.recorded_pairs(changed)
        return pairs
    return recorded_py(changed)


def recorded_py(changed: list[Any]) -> dict[Any, Any]:
    """:func:`recorded` in Python (the fallback, and the model of the C version)."""
    return dict(zip(islice(changed, 0, None, 2), islice(changed, 1, None, 2), strict=True))


class RecordedChanges(Sequence[dict[Any, Any]]):
    """One epoch of a table's record: per key-group index, id -> the state its last write
    left (``None``: removed), built when asked. ``lists`` is the epoch's whole record, the
    guard's list last (not part of it: taking the record copies nothing)."""

    def __init__(self, lists: list[list[Any]]) -> None:
        self._lists = lists
        self._len = len(lists) - 1

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> dict[Any, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[dict[Any, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[Any, Any] | Sequence[dict[Any, Any]]:
        if isinstance(index, slice):
            return [recorded(self._lists[i]) for i in range(*index.indices(self._len))]
        if not -self._len <= index < self._len:
            raise IndexError(index)
        return recorded(self._lists[index % self._len])


class _GuardMap(StateMap):
    """Sits at index -1 of every table: any access without a current key lands here."""

    def __init__(self, closed: Callable[[], bool]) -> None:
        self._closed = closed

    def _fail(self) -> StateAccessError:
        if self._closed():
            return StateAccessError("the backend is closed", code="BACKEND_CLOSED")
        return StateAccessError(
            "no current key: call set_current_key(key) before using keyed state",
            code="NO_CURRENT_KEY",
        )

    def get(self, key: Any, namespace: Any) -> Any:
        raise self._fail()

    def put(self, key: Any, namespace: Any, state: Any) -> None:
        raise self._fail()

    def remove(self, key: Any, namespace: Any) -> Any:
        raise self._fail()

    def contains(self, key: Any, namespace: Any) -> bool:
        raise self._fail()

    def keys(self, namespace: Any) -> list[Any]:
        raise self._fail()

    def __len__(self) -> int:
        return 0

    def entries(self) -> Iterator[Entry]:
        return iter(())

    def snapshot(self) -> StateMapSnapshot:
        raise self._fail()

    def cursor(self) -> MapCursor:
        raise self._fail()


def _plain() -> ColumnTransform:
    """The transform of a state with nothing to transform (known without a call)."""
    return plain_columns


class StateTable:
    """The maps of one state; ``lookup[kgi]`` is the map of key-group index ``kgi``."""

    def __init__(
        self,
        meta: StateMetaInfo,
        key_group_range: KeyGroupRange,
        create_map: Callable[[CopyFn | None], StateMap],
        copy_state: CopyFn | None,
        guard: StateMap,
    ) -> None:
        self.meta = meta
        self.key_group_range = key_group_range
        self.maps = [create_map(copy_state) for _ in key_group_range]
        self.immutable = copy_state is None
        """States are never mutated in place (no copy function): a recorded state stays the
        state the map holds until the next write, so increments may use it as it is."""
        self.lookup = [*self.maps, guard]
        self.namespace_type: TypeInformation | None = None
        self._ns_pytype: type | None = None
        self.transform_factory: Callable[[], ColumnTransform] = _plain
        self.changes: list[list[Any]] = []
        """Empty when not recording; else one list per key-group index, plus one for the
        guard (each epoch has its own; the table's states hold it too), of changed composite keys,
        each followed by the state the write left (``None``: removed). A write appends
        (cheaper than a dict or set insert: no probing, no growing table); a list past
        ``compact_at`` drops its repeats (see :func:`compact`), so hot keys cost no memory.
        For immutable states the record is the increment: a checkpoint writes it as it is."""
        self.compact_at = COMPACT_AT
        self._spare: list[list[Any]] | None = None
        self._states: list[Any] = []

    def attach(self, state: Any) -> list[list[Any]]:
        """``state`` writes to this table: it is given each epoch's record (returned: the
        current one), so a take swaps one list and touches no key group's."""
        self._states.append(state)
        return self.changes

    def record_changes(self) -> Changed | None:
        """Start a new epoch: return what was recorded so far (``None`` if not recording).
        The new epoch's lists are those :meth:`prepare_record` made, when it ran since."""
        taken = self.changes
        fresh, self._spare = self._spare, None
        if fresh is None:
            fresh = [[] for _ in range(len(self.maps) + 1)]
        self.changes = fresh
        for state in self._states:
            state._changes = fresh
        return RecordedChanges(taken) if taken else None

    def prepare_record(self) -> None:
        """Make the next epoch's empty lists ahead, off the synchronous part (a checkpoint's
        writer thread calls it as it releases its snapshot): the next take allocates nothing."""
        if self.changes:
            self._spare = [[] for _ in range(len(self.maps) + 1)]

    def record(self, kgi: int, key: Any, namespace: Any, state: Any) -> None:
        """Note that the entry (key, namespace) of key-group index ``kgi`` now holds ``state``
        (``None``: it was removed)."""
        if self.changes:
            changed = self.changes[kgi]
            changed.append(compose(key, namespace))
            changed.append(state)
            if len(changed) > self.compact_at:
                self.compact_at = compact(changed)

    def set_namespace_type(self, namespace_type: TypeInformation | None) -> None:
        """Adopt a restored namespace type."""
        if namespace_type is not None:
            self.namespace_type, self._ns_pytype = namespace_type, None

    def set_copy_state(self, copy_state: CopyFn | None) -> None:
        for state_map in self.maps:
            state_map.set_copy_state(copy_state)
        self.immutable = copy_state is None

    def check_namespace(self, namespace: Any) -> None:
        """Fix the namespace type at the first non-void namespace; refuse others after."""
        if namespace is None or type(namespace) is self._ns_pytype:
            return
        inferred = infer_type(namespace)
        if self.namespace_type is None:
            self.namespace_type, self._ns_pytype = inferred, type(namespace)
        elif inferred == as_inferred(self.namespace_type):
            self._ns_pytype = type(namespace)
        else:
            raise StateTypeError(
                f"namespace {namespace!r} does not match the namespace type "
                f"{self.namespace_type} of state {self.meta.name!r}",
                code="NAMESPACE_TYPE_MISMATCH",
            )

    def keys(self, namespace: Any) -> Iterator[Any]:
        for state_map in self.maps:
            yield from state_map.keys(namespace)

    def __len__(self) -> int:
        return sum(len(m) for m in self.maps)

    def current_meta(self) -> StateMetaInfo:
        """The state's description, with the namespace type it has now."""
        if self.meta.namespace_type is self.namespace_type:
            return self.meta
        return replace(self.meta, namespace_type=self.namespace_type)

    def snapshot(self, key_is_tuple: bool = False, base: StateMetaInfo | None = None) -> HeapStateSnapshot:
        """Freeze the maps. Given the description ``base`` this state had in the increment's
        base, freeze nothing when it is the same, the states are immutable and no TTL
        cleanup needs full snapshots: the snapshot then answers
        :meth:`HeapStateSnapshot.changed_entries` from the record."""
        meta = self.meta if self.meta.namespace_type is self.namespace_type else self.current_meta()
        changes_only = (
            base is not None and self.immutable and (base is meta or base == meta)
            and not meta.full_in_every_checkpoint
        )  # fmt: skip
        snapshots = None if changes_only else [m.snapshot() for m in self.maps]
        composite = key_is_tuple or self.namespace_type is not None
        factory = self.transform_factory
        return HeapStateSnapshot(
            meta, self.key_group_range, snapshots, plain_columns if factory is _plain else factory(),
            composite, self.immutable, self.prepare_record,
        )  # fmt: skip


class HeapStateSnapshot(StateSnapshot):
    """A state's map snapshots, one per key group (none when it holds the changes only)."""

    __slots__ = ("meta", "changes_only", "_on_release", "_range", "_snapshots", "_released",
                 "_transform", "_composite", "_immutable")  # fmt: skip

    def __init__(
        self,
        meta: StateMetaInfo,
        key_group_range: KeyGroupRange,
        snapshots: list[StateMapSnapshot] | None,
        transform: ColumnTransform,
        composite: bool,
        immutable: bool = False,
        on_release: Callable[[], None] | None = None,
    ) -> None:
        self.meta = meta
        self._on_release = on_release
        self.changes_only = snapshots is None
        self._range = key_group_range
        self._snapshots = snapshots or []
        self._released = False
        self._transform = transform
        self._composite = composite
        self._immutable = immutable

    def _maps(self) -> list[StateMapSnapshot]:
        if self._released:
            raise StateAccessError("the snapshot was released", code="SNAPSHOT_RELEASED")
        if self.changes_only:
            raise StateAccessError(
                f"state {self.meta.name!r}: this snapshot holds only the changes since the last "
                "checkpoint, not every entry",
                code="SNAPSHOT_CHANGES_ONLY",
            )
        return self._snapshots

    def columns(self, key_group: int) -> StateColumns:
        if key_group not in self._range:
            return StateColumns([], None, [])
        keys, namespaces, states = self._maps()[key_group - self._range.start].raw_columns(self._composite)
        return self._transform(keys, namespaces, states)

    def int64_columns(self, key_group: int) -> Int64Columns | None:
        if key_group not in self._range or self._composite or self._transform is not plain_columns:
            return None
        items = self._maps()[key_group - self._range.start].int64_items()
        return None if items is None else Int64Columns(*items)

    def changed_entries(self, key_group: int, ids: Collection[Any]) -> ChangedEntries:
        # The record holds each id's state as of the snapshot (``None``: removed), so for
        # immutable states it is the increment as it is. A mutable state may have been
        # mutated in place since it was recorded: those are looked up in the snapshot.
        if isinstance(ids, dict) and self._immutable:
            if self._released:
                raise StateAccessError("the snapshot was released", code="SNAPSHOT_RELEASED")
            found, states, missing = split_known(ids, None)
        else:
            found, states, missing = self._maps()[key_group - self._range.start].resolve(ids)
        if self._composite:
            pairs = [decompose(ck) for ck in found]
            keys, namespaces = [p[0] for p in pairs], [p[1] for p in pairs]
            upserts = self._transform(keys, namespaces, states)
        else:  # keys stored alone: the composite key is the key
            upserts = self._transform(found, None, states)
        gone = [decompose(ck) for ck in missing]
        return ChangedEntries.of(self.meta, upserts, gone, self._composite)

    def release(self) -> None:
        for snap in self._snapshots:
            snap.release()
        self._snapshots = []
        self._released = True
        if self._on_release is not None:
            self._on_release()


class HeapIncrementalVisitor(StateIncrementalVisitor):
    """Walks a table's maps key group by key group, resuming where it stopped."""

    def __init__(self, table: StateTable) -> None:
        self._table = table
        self._maps = table.maps
        self._index = 0
        self._cursor = self._maps[0].cursor()

    def next_entries(self) -> list[tuple[Any, Any]]:
        while True:
            batch = self._cursor.next_batch()
            if batch:
                return batch
            self._index += 1
            if self._index >= len(self._maps):
                self._index = 0
                self._cursor = self._maps[0].cursor()
                return []
            self._cursor = self._maps[self._index].cursor()

    def remove(self, handle: Any) -> None:
        self._table.record(self._index, *self._cursor.entry(handle), None)
        self._cursor.remove(handle)

    def update(self, handle: Any, state: Any) -> None:
        self._table.record(self._index, *self._cursor.entry(handle), state)
        self._cursor.update(handle, state)

    def skip(self, fresh_after: Any) -> int:
        return self._cursor.skip(fresh_after)

    def set_hint(self, hint: Any) -> None:
        self._cursor.set_hint(hint)

    def reset_hints(self) -> None:
        for state_map in self._maps:
            state_map.reset_hints()
