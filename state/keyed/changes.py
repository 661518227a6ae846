"""Change recording for incremental checkpoints: what changed since the last completed one.

A backend that records changes keeps, per state and per key group, the entry ids
(a heap backend: the composite key of a (key, namespace) scope; RocksDB: the key bytes of
the scope) written, removed or expired since recording began. Taking the record is part
of the synchronous snapshot: the backend hands its current sets over and installs fresh
ones, so writes that follow land in the next epoch, while the snapshot resolves the ids
it was given against its frozen view.

The :class:`ChangeLog` keeps every epoch not yet covered by a completed checkpoint. An
increment carries all of them (relative to :attr:`ChangeLog.base`, the last completed
checkpoint); when its checkpoint commits, those epochs are dropped and it becomes the
base. A failed or aborted checkpoint drops nothing: the next increment, relative to the
same base, still carries its changes. Recording starts at the first take; until then
there is no base and the checkpoint layer writes in full.

A take says where its checkpoint goes (a ``scope``: storage root, operator, subtask,
parallelism). The base is the last completed checkpoint *of the same scope*: a take for
another scope has none (:attr:`ChangeSet.base` is ``None``), so an increment is only ever
built over the checkpoint its changes were recorded against. When the base also has the
same state descriptions, a backend may answer the increment from its record alone,
without freezing its state (see :meth:`ChangeLog.take`); the writer asks for a frozen
state next time (:meth:`ChangeSet.request_full`) where it must write a state in full.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from typing import NamedTuple

from .snapshot import Changed, ChangeSet, KeyedStateSnapshot, StateMetaInfo, StateSnapshot

TakeIncrement = Callable[
    [Mapping[str, StateMetaInfo] | None, Collection[str]],
    tuple[KeyedStateSnapshot, Mapping[str, Changed]] | None,
]
_NONE: frozenset[str] = frozenset()


class _Epoch(NamedTuple):
    seq: int
    checkpoint_id: int
    changes: Mapping[str, Changed]
    states: Mapping[str, StateSnapshot]
    """The snapshot taken with it: which states it froze, and their descriptions."""
    scope: Hashable | None
    requested: frozenset[str]


class _Base(NamedTuple):
    """The epoch of the last completed checkpoint, as later takes need it."""

    scope: Hashable | None
    metas: Mapping[str, StateMetaInfo]


class ChangeLog:
    """The unconfirmed epochs of one backend (see the module docstring)."""

    def __init__(self) -> None:
        self._epochs: list[_Epoch] = []
        self._records: tuple[Mapping[str, Changed], ...] = ()
        """Each epoch's changes, oldest first."""
        self._seq = 0
        self.base: int | None = None
        self._base_epoch: _Base | None = None
        self.recording = False
        self.full_next: set[str] = set()
        """States takes must freeze, and writers write in full, until a checkpoint taken
        with them asked for commits (see :meth:`ChangeSet.request_full`)."""

    def take(
        self,
        checkpoint_id: int,
        scope: Hashable | None,
        take_increment: TakeIncrement,
        full: bool = False,
    ) -> KeyedStateSnapshot | None:
        """Close the current epoch for ``checkpoint_id``, written to ``scope`` (in full when
        ``full``): the backend's ``take_increment`` hands over its record and snapshots at
        the same moment (``None``: it does not record changes). The change set's base is the
        last completed checkpoint when that went to the same scope (else none). The backend
        is given the base's state descriptions when it went to the same, known scope (else
        ``None``): states whose description is the same there may be snapshot as their
        changes only (see :attr:`StateSnapshot.changes_only`). The snapshot gets its
        :class:`ChangeSet`. One call, no helpers: this is the synchronous part of an
        increment."""
        base = self._base_epoch
        same_scope = base is not None and self.recording and not full and base.scope == scope
        metas = base.metas if base is not None and same_scope and scope is not None else None
        requested = frozenset(self.full_next) if self.full_next else _NONE
        taken = take_increment(metas, requested)
        if taken is None:
            return None
        snap, changes = taken
        base_id = self.base if same_scope else None
        self.recording = True
        self._seq += 1
        # tuple.__new__ builds the NamedTuple without running Python code (cheaper when cold)
        epoch = (self._seq, checkpoint_id, changes, snap.states, scope, requested)
        self._epochs.append(tuple.__new__(_Epoch, epoch))
        self._records += (changes,)
        snap.changes = ChangeSet(base_id, self._seq, self._records, requested, self)
        return snap

    def complete(self, epoch: int, checkpoint_id: int) -> None:
        """The checkpoint of ``epoch`` committed: drop it and every older epoch."""
        if not self._epochs or epoch < self._epochs[0].seq:
            return  # a later checkpoint already completed
        done = next(e for e in self._epochs if e.seq == epoch)
        # its record is written: keep only what later takes ask of it
        self._base_epoch = _Base(done.scope, {name: st.meta for name, st in done.states.items()})
        self._epochs = [e for e in self._epochs if e.seq > epoch]
        self._records = tuple(e.changes for e in self._epochs)
        self.base = checkpoint_id
        self.full_next -= done.requested  # frozen and written in full by its writer

    def complete_checkpoint(self, checkpoint_id: int) -> bool:
        """Complete the latest epoch taken for ``checkpoint_id`` (a commit made elsewhere)."""
        epochs = [e.seq for e in self._epochs if e.checkpoint_id == checkpoint_id]
        if epochs:
            self.complete(epochs[-1], checkpoint_id)
        return bool(epochs)

    def restored(self, checkpoint_id: int, scope: Hashable, metas: Mapping[str, StateMetaInfo]) -> None:
        """The backend holds exactly checkpoint ``checkpoint_id``'s state of ``scope`` (restored
        from it, with ``metas``): record from here, so the next checkpoint to ``scope`` is an
        increment over that one, as if this backend had written it."""
        self.reset()
        self._base_epoch = _Base(scope, dict(metas))
        self.base = checkpoint_id
        self.recording = True

    def reset(self) -> None:
        """Forget every epoch and the base (after a restore: the next checkpoint is full)."""
        self._epochs = []
        self._records = ()
        self.base = None
        self._base_epoch = None
        self.recording = False
        self.full_next = set()

    @property
    def pending(self) -> int:
        """How many epochs wait for a completed checkpoint."""
        return len(self._epochs)
