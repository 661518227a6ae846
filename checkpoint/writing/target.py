"""Where and how one checkpoint is written: what a task needs to write its subtask's part.

A :class:`PendingCheckpoint` lives with whoever commits (a driver); its ``target`` is small
and picklable, so a task elsewhere (a Spark executor holding a live backend) can snapshot
its backend for the checkpoint, write its files, and send back the :class:`SubtaskResult`
for ``pending.add(result)``. Once the driver has committed, the task tells its backend with
``backend.notify_checkpoint_complete(checkpoint_id)``, so later increments build on it.

:meth:`CheckpointTarget.write_snapshot` is the one path from a snapshot to a subtask's
files: every writer of keyed state (here, :class:`~.checkpoints.PendingCheckpoint` and the
``process`` runner's tasks) goes through it, and it releases the snapshot however it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from flinkstate.state.keyed.backend import AbstractKeyedStateBackend
from flinkstate.state.keyed.snapshot import KeyedStateSnapshot
from flinkstate.state.keygroups.assignment import KeyGroupRange
from flinkstate.state.operator import OperatorStateBackend, OperatorStateData
from flinkstate.state.rocksdb.backend import RocksDBKeyedStateBackend
from flinkstate.state.ttl.time import LONG_MIN

from ..errors import CheckpointError
from ..local_cache import FileCache
from ..reading.restore import CompletedCheckpoint
from ..storage import Storage
from .increments import BaseChain, ChainPolicy, load_base
from .writer import SubtaskResult, SubtaskWriter


@dataclass(frozen=True)
class CheckpointTarget:
    """Checkpoint ``checkpoint_id`` in ``directory`` (under checkpoint root ``root``, if any).

    With a ``policy``, keyed backends are snapshot with their changes and written as
    increments over their last completed checkpoint (in full when ``full``). With
    ``native``, a RocksDB backend is snapshot as its SST files instead.
    """

    directory: Storage
    checkpoint_id: int
    root: Storage | None = None
    policy: ChainPolicy | None = None
    full: bool = False
    native: bool = False
    """A RocksDB backend is snapshot natively, as the files of a RocksDB checkpoint (only
    under a checkpoint root; see :mod:`.native`)."""

    def snapshot(
        self,
        backend: AbstractKeyedStateBackend,
        uid: str | None = None,
        subtask: int = 0,
        parallelism: int = 1,
    ) -> KeyedStateSnapshot:
        """The synchronous part: ``backend``'s snapshot (with its changes when recording).

        Given the ``uid``, ``subtask`` and ``parallelism`` it is written as, a backend whose
        last completed checkpoint went to the same place may snapshot states as their
        changes only (see :mod:`flinkstate.state.keyed.changes`). An increment builds only on a
        base that went to the same place; without a ``uid`` it is written in full."""
        snap: KeyedStateSnapshot
        if self._native(backend):
            assert isinstance(backend, RocksDBKeyedStateBackend)
            snap = backend.native_snapshot()
        elif self.policy is None:
            snap = backend.snapshot()
        else:
            scope = None if uid is None else self._scope(uid, subtask, parallelism)
            snap = backend.snapshot_for_checkpoint(self.checkpoint_id, scope, full=self.full or scope is None)
        watermark = backend.current_watermark
        snap.watermark = None if watermark == LONG_MIN else watermark
        return snap

    def through(self, cache: FileCache) -> CheckpointTarget:
        """This target with every file written also kept in ``cache`` (a restore on this
        machine then reads it from there; see :mod:`..local_cache`)."""
        root = None if self.root is None else cache.storage(self.root)
        return replace(self, directory=cache.storage(self.directory), root=root)

    def _native(self, backend: AbstractKeyedStateBackend) -> bool:
        return self.native and self.root is not None and isinstance(backend, RocksDBKeyedStateBackend)

    def _scope(self, uid: str, subtask: int, parallelism: int) -> tuple[Any, ...] | None:
        """Where subtask ``subtask`` of ``parallelism`` of ``uid`` is checkpointed (``None``:
        not under a root, so never an increment; see :mod:`flinkstate.state.keyed.changes`)."""
        if self.root is None:
            return None
        return (self.root.protocol, self.root.root, uid, subtask, parallelism)

    def continue_from(
        self,
        backend: AbstractKeyedStateBackend,
        restored: CompletedCheckpoint,
        uid: str,
        subtask: int,
        parallelism: int,
    ) -> bool:
        """``backend`` was just restored from ``restored`` as subtask ``subtask`` of
        ``parallelism``: when that checkpoint is an earlier one under this root holding this
        very subtask (same parallelism, same key groups, in Parquet files), the next
        snapshot for this target is an increment over it, not a full copy. Returns whether it
        is. (A native RocksDB snapshot is by files, each uploaded once: incremental already.)"""
        if self.policy is None or self.full or self._native(backend):
            return False
        scope, root = self._scope(uid, subtask, parallelism), self.root
        if scope is None or root is None or restored.directory.protocol != root.protocol:
            return False
        if restored.directory.path("") != root.path(f"chk-{restored.checkpoint_id}"):
            return False
        if restored.checkpoint_id >= self.checkpoint_id:
            return False
        op = restored.manifest.operator(uid)
        same = op is not None and op.parallelism == parallelism
        entry = next((st for st in op.subtasks if st.index == subtask), None) if same and op else None
        held = backend.key_group_range
        if entry is None or entry.native is not None or entry.key_group_range != (held.start, held.end):
            return False
        backend.record_from(restored.checkpoint_id, scope)
        return True

    def base_of(self, uid: str, snapshot: KeyedStateSnapshot | None) -> BaseChain | None:
        """The checkpoint ``snapshot``'s changes build on, seen from this checkpoint's directory."""
        base_id = None if snapshot is None or snapshot.changes is None else snapshot.changes.base
        return load_base(self.root, base_id, uid, f"chk-{self.checkpoint_id}")

    def writer(self, uid: str, subtask: int, parallelism: int, max_parallelism: int) -> SubtaskWriter:
        return SubtaskWriter(self.directory, uid, subtask, parallelism, max_parallelism, self.checkpoint_id,
                             self.policy, self.root)  # fmt: skip

    def discard(self, result: SubtaskResult) -> None:
        """Delete the files ``result`` wrote (an attempt that will not be committed)."""
        for path in result.written:
            self.directory.delete(path)

    def write_keyed(
        self,
        uid: str,
        backend: AbstractKeyedStateBackend,
        subtask: int = 0,
        parallelism: int = 1,
        operator: OperatorStateBackend | None = None,
    ) -> SubtaskResult:
        """Snapshot ``backend`` (and ``operator``) and write them now (in a task); the result
        goes to the committer."""
        snapshot = self.snapshot(backend, uid, subtask, parallelism)
        try:
            states = None if operator is None else operator.snapshot()
        except BaseException:
            snapshot.release()
            raise
        return self.write_snapshot(uid, subtask, parallelism, snapshot, operator=states)

    def write_snapshot(
        self,
        uid: str,
        subtask: int,
        parallelism: int,
        keyed: KeyedStateSnapshot | None,
        *,
        max_parallelism: int | None = None,
        operator: Iterable[OperatorStateData] | None = None,
        raw_keyed: dict[int, bytes] | None = None,
        raw_operator: list[bytes] | None = None,
        key_group_range: KeyGroupRange | None = None,
        base_of: Callable[[str, KeyedStateSnapshot | None], BaseChain | None] | None = None,
    ) -> SubtaskResult:
        """Write subtask ``subtask``'s part: the ``keyed`` snapshot :meth:`snapshot` took
        (released here, written or not), operator and raw state. ``max_parallelism``: the
        keyed snapshot's, unless there is none; ``base_of``: how an increment's base is
        found (default :meth:`base_of`)."""
        try:
            if keyed is not None:
                max_parallelism = keyed.max_parallelism
            elif max_parallelism is None:
                raise CheckpointError(
                    f"operator {uid!r} subtask {subtask}: max_parallelism is needed without keyed state",
                    code="INVALID_ARGUMENT",
                )
            writer = self.writer(uid, subtask, parallelism, max_parallelism)
            base = (base_of or self.base_of)(uid, keyed)
            return writer.write(keyed, operator, raw_keyed, raw_operator, key_group_range, base)
        finally:
            if keyed is not None:
                keyed.release()
