"""Backend-neutral snapshots: what the checkpoint layer writes and any backend restores."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import TracebackType
from typing import Any, NamedTuple, Protocol

from ..descriptors import StateKind
from ..errors import StateAccessError
from ..keygroups.assignment import KeyGroupRange
from ..ttl.config import StateTtlConfig
from ..types.mapping import TypeInformation


@dataclass(frozen=True)
class StateMetaInfo:
    """What a keyed state is: name, kind and types.

    ``value_type`` is the value type (VALUE, REDUCING), the element type (LIST), the
    map value type (MAP) or the accumulator type (AGGREGATING).
    """

    name: str
    kind: StateKind
    value_type: TypeInformation
    user_key_type: TypeInformation | None = None
    namespace_type: TypeInformation | None = None
    ttl: StateTtlConfig | None = None

    @cached_property
    def full_in_every_checkpoint(self) -> bool:
        """Its TTL cleans up in full snapshots: expiry must show in every checkpoint, so it
        is never written as an increment."""
        return self.ttl is not None and bool(self.ttl.cleanup_strategies.full_snapshot)

    def agrees_with(self, recorded: StateMetaInfo) -> bool:
        """Whether this (one subtask's) description is ``recorded`` (the operator's, over all
        its subtasks): equal, or equal but for the namespace type when this subtask has
        fixed none (it used the void namespace only; the type is inferred at the first
        typed namespace)."""
        return self == recorded or (
            self.namespace_type is None and replace(self, namespace_type=recorded.namespace_type) == recorded
        )


class StateEntry(NamedTuple):
    """One entry of a snapshot.

    ``value`` is the state's value: a value, a list (LIST) or a dict (MAP). With TTL,
    ``timestamp`` is the last-access time in epoch milliseconds: one int for
    value-like kinds, a list parallel to the elements (LIST), a dict by user key (MAP).
    """

    key: Any
    namespace: Any
    value: Any
    timestamp: Any = None


@dataclass
class StateColumns:
    """A key group's entries as parallel lists (``namespaces`` is None when all void)."""

    keys: list[Any]
    namespaces: list[Any] | None
    values: list[Any]
    timestamps: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def entries(self) -> Iterator[StateEntry]:
        n = len(self.keys)
        namespaces = self.namespaces if self.namespaces is not None else [None] * n
        timestamps = self.timestamps if self.timestamps is not None else [None] * n
        for row in zip(self.keys, namespaces, self.values, timestamps, strict=True):
            yield StateEntry(*row)


@dataclass(frozen=True)
class Int64Columns:
    """A key group's keys and values as native int64 buffers (a fast path of
    :meth:`StateSnapshot.int64_columns`): the same entries, in the same order, as
    :meth:`StateSnapshot.columns` gives."""

    keys: bytes
    values: bytes

    def __len__(self) -> int:
        return len(self.keys) // 8


ColumnTransform = Callable[[list[Any], "list[Any] | None", list[Any]], StateColumns]
"""Turns stored (keys, namespaces, states) into snapshot columns (unwrapping, filtering)."""


def plain_columns(keys: list[Any], namespaces: list[Any] | None, states: list[Any]) -> StateColumns:
    return StateColumns(keys, namespaces, states)


@dataclass
class ChangedEntries:
    """A key group's changed entries, as an increment writes them: ``deletes`` (keys and
    namespaces of scopes removed, or for LIST and MAP replaced whole) applied before
    ``upserts`` (the scopes' values as of the snapshot)."""

    deletes: StateColumns
    upserts: StateColumns

    def __len__(self) -> int:
        return len(self.deletes) + len(self.upserts)

    @staticmethod
    def of(
        meta: StateMetaInfo, upserts: StateColumns, gone: list[tuple[Any, Any]], composite: bool
    ) -> ChangedEntries:
        """Deletes for ``gone`` scopes and, since their rows append, for every LIST/MAP upsert."""
        keys = [k for k, _ in gone]
        namespaces = [n for _, n in gone]
        if meta.kind in (StateKind.LIST, StateKind.MAP):
            keys += upserts.keys
            namespaces += upserts.namespaces or [None] * len(upserts.keys)
        deletes = StateColumns(keys, namespaces if composite else None, [None] * len(keys))
        return ChangedEntries(deletes, upserts)


class StateSnapshot(ABC):
    """One state's frozen entries, readable key group by key group."""

    meta: StateMetaInfo
    changes_only: bool = False
    """Only :meth:`changed_entries` can be read (a heap state's increment taken without
    freezing its maps): the checkpoint must write it as an increment."""

    @abstractmethod
    def columns(self, key_group: int) -> StateColumns:
        """The entries of ``key_group`` (absolute index) as of the snapshot, as columns."""

    def int64_columns(self, key_group: int) -> Int64Columns | None:
        """The entries of ``key_group`` as int64 buffers when every key and value is a plain
        ``int`` in int64 range with no namespace and nothing to transform; ``None``
        otherwise (and by default): then read :meth:`columns`."""
        return None

    def column_chunks(self, key_group: int) -> Iterator[StateColumns]:
        """The entries of ``key_group`` as consecutive chunks of columns (by default one): a
        backend holding more than memory reads a large key group a bounded chunk at a time."""
        yield self.columns(key_group)

    def entries(self, key_group: int) -> Iterator[StateEntry]:
        """The entries of ``key_group`` one by one."""
        return self.columns(key_group).entries()

    def changed_entries(self, key_group: int, ids: Collection[Any]) -> ChangedEntries:
        """The entries of ``key_group`` whose ids (from a :class:`ChangeSet`) are
        ``ids``, as of the snapshot. Only backends that record changes are asked."""
        raise StateAccessError(
            f"state {self.meta.name!r}: this backend does not record changes", code="CHANGES_UNSUPPORTED"
        )

    @abstractmethod
    def release(self) -> None: ...


class EpochLog(Protocol):
    """What a change set needs of the log it came from (a :class:`~.changes.ChangeLog`)."""

    full_next: set[str]

    def complete(self, epoch: int, checkpoint_id: int) -> None: ...


Changed = Sequence[Collection[Any]]
"""One state's changed entry ids, one collection per key-group index of the backend's range
(a heap backend's are dicts: id -> the state its last write left, ``None``: removed)."""


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """What an incremental checkpoint writes: everything changed since checkpoint ``base``.

    ``base`` is ``None`` when there is nothing to build on (recording just began, the
    backend was restored since, the base went elsewhere, or the checkpoint is written in
    full). ``requested``: states asked for in full (:meth:`request_full`) when it was
    taken; they are frozen, and the writer writes them in full.
    """

    base: int | None
    epoch: int
    epochs: tuple[Mapping[str, Changed], ...]
    requested: frozenset[str]
    log: EpochLog = field(repr=False, compare=False)

    def changed(self, state: str, kgi: int) -> Collection[Any]:
        """The ids of ``state``'s entries in key-group index ``kgi`` that changed since the
        base (a dict when every epoch's is: the later epoch's states win)."""
        parts = [e[state][kgi] for e in self.epochs if state in e]
        if len(parts) == 1:
            return parts[0]
        if parts and all(type(p) is dict for p in parts):
            merged: dict[Any, Any] = {}
            for part in parts:
                merged.update(part)
            return merged
        return set().union(*parts)

    def confirm(self, checkpoint_id: int) -> None:
        """The checkpoint written from this change set has committed as ``checkpoint_id``."""
        self.log.complete(self.epoch, checkpoint_id)

    def request_full(self, state: str) -> None:
        """Later takes must freeze ``state`` and write it in full (until a checkpoint that
        did commits): its chain is due for compaction, or could not be built on its base."""
        self.log.full_next.add(state)


@dataclass(slots=True)
class KeyedStateSnapshot:
    """A keyed backend's frozen state: per state name, entries by key group.

    Taking it is the synchronous part of a checkpoint; reading it may run in another
    thread while the backend goes on. ``release()`` (or a ``with`` block) frees it.
    """

    key_type: TypeInformation | None
    max_parallelism: int
    key_group_range: KeyGroupRange
    states: Mapping[str, StateSnapshot]
    changes: ChangeSet | None = None
    """What changed since the last completed checkpoint (only when taken for an increment)."""
    watermark: int | None = None
    """The backend's event-time watermark when taken (``None``: none yet)."""

    def release(self) -> None:
        for state in self.states.values():
            state.release()

    def __enter__(self) -> KeyedStateSnapshot:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
