"""Where and how one checkpoint is written: what a task needs to write its subtask's part.

A :class:`PendingCheckpoint` lives with whoever commits (a driver); its ``target`` is small
and picklable, so a task elsewhere (a Spark executor holding a live backend) can snapshot
its backend for the checkpoint, write its files, and send back the :class:`SubtaskResult`
for ``pending.add(result)``. Once the driver has committed, the task tells its backend with
``backend.notify_checkpoint_complete(checkpoint_id)``, so later increments build on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from flinkstate.state.keyed.backend import AbstractKeyedStateBackend
from flinkstate.state.keyed.snapshot import KeyedStateSnapshot
from flinkstate.state.ttl.time import LONG_MIN

from .increments import BaseChain, ChainPolicy, load_base
from .storage import Storage
from .writer import SubtaskResult, SubtaskWriter


@dataclass(frozen=True)
class CheckpointTarget:
    """Checkpoint ``checkpoint_id`` in ``directory`` (under checkpoint root ``root``, if any).

    With a ``policy``, keyed backends are snapshot with their changes and written as
    increments over their last completed checkpoint (in full when ``full``).
    """

    directory: Storage
    checkpoint_id: int
    root: Storage | None = None
    policy: ChainPolicy | None = None
    full: bool = False

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
        if self.policy is None:
            snap = backend.snapshot()
        else:
            scope = None
            if uid is not None and self.root is not None:
                scope = (self.root.protocol, self.root.root, uid, subtask, parallelism)
            snap = backend.snapshot_for_checkpoint(self.checkpoint_id, scope, full=self.full or scope is None)
        watermark = backend.current_watermark
        snap.watermark = None if watermark == LONG_MIN else watermark
        return snap

    def base_of(self, uid: str, snapshot: KeyedStateSnapshot | None) -> BaseChain | None:
        """The checkpoint ``snapshot``'s changes build on, seen from this checkpoint's directory."""
        base_id = None if snapshot is None or snapshot.changes is None else snapshot.changes.base
        return load_base(self.root, base_id, uid, f"chk-{self.checkpoint_id}")

    def writer(self, uid: str, subtask: int, parallelism: int, max_parallelism: int) -> SubtaskWriter:
        return SubtaskWriter(self.directory, uid, subtask, parallelism, max_parallelism, self.checkpoint_id,
                             self.policy)  # fmt: skip

    def write_keyed(
        self, uid: str, backend: AbstractKeyedStateBackend, subtask: int = 0, parallelism: int = 1
    ) -> SubtaskResult:
        """Snapshot ``backend`` and write it now (in a task); the result goes to the committer."""
        snapshot = self.snapshot(backend, uid, subtask, parallelism)
        try:
            writer = self.writer(uid, subtask, parallelism, backend.max_parallelism)
            return writer.write(keyed=snapshot, base=self.base_of(uid, snapshot))
        finally:
            snapshot.release()
