"""A checkpoint being written: its subtasks' files gathered, then committed or aborted.

A :class:`PendingCheckpoint` is ``open`` until :meth:`~PendingCheckpoint.commit`
(``committed``) or :meth:`~PendingCheckpoint.abort` (``aborted``); a commit whose publish
fails with an unknown outcome is ``failed``. Every other call checks the state first
(``[CHECKPOINT_STATE]``). Its subtasks write through its :class:`.target.CheckpointTarget`
(one snapshot -> write -> release path), here or in a task elsewhere.
"""

from __future__ import annotations

import enum
import posixpath
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from functools import partial
from typing import Any

from flinkstate.state.keyed.backend import AbstractKeyedStateBackend
from flinkstate.state.keyed.snapshot import ChangeSet, KeyedStateSnapshot
from flinkstate.state.keygroups.assignment import KeyGroupRange
from flinkstate.state.operator import OperatorStateBackend

from ..errors import CheckpointError, CheckpointExistsError, CheckpointStateError, CommitFilesMissingError
from ..manifest import Manifest
from ..reading.restore import CompletedCheckpoint
from ..storage import Storage
from .committer import build_manifest, publish_manifest
from .increments import BaseChain, ChainPolicy
from .inflight import InFlightCheckpoints, base_files, refuse_unsound
from .target import CheckpointTarget
from .threads import writers
from .writer import SubtaskResult, SubtaskWriter


class PendingStatus(enum.Enum):
    """Where a :class:`PendingCheckpoint` is in its life."""

    OPEN = "open"
    """Taking snapshots and results; may commit or abort."""
    COMMITTED = "committed"
    """Its manifest is published."""
    ABORTED = "aborted"
    """Its files are deleted (by :meth:`PendingCheckpoint.abort`, or by a commit that failed
    before publishing); the previous checkpoint is untouched."""
    FAILED = "failed"
    """Publishing its manifest raised: the outcome may be unknown (a late create may still
    land), so its files stay (retention removes them if the manifest never appears)."""


class PendingCheckpoint:
    """A checkpoint being written: subtasks write data files, then :meth:`commit`.

    Its :attr:`status` only moves forward, from ``OPEN`` to ``COMMITTED``, ``ABORTED`` or
    ``FAILED``; every method but :meth:`holds` needs it ``OPEN`` (an ``[CHECKPOINT_STATE]``
    error otherwise), except :meth:`abort`, which does nothing on an aborted checkpoint.
    """

    def __init__(
        self,
        directory: Storage,
        checkpoint_id: int,
        kind: str = "checkpoint",
        base: Manifest | None = None,
        *,
        root: Storage | None = None,
        retain: int | None = None,
        policy: ChainPolicy | None = None,
        full: bool = False,
        in_flight: InFlightCheckpoints | None = None,
        native: bool = False,
    ) -> None:
        """With a ``policy``, keyed backends are snapshot with their changes: written as
        increments over their last completed checkpoint (in full when ``full``), and told
        when this checkpoint commits. Without, every snapshot is written in full.
        ``in_flight``: the storage's checkpoints in flight, this one among them until done.
        ``native``: RocksDB backends are written as their SST files (see :mod:`.native`)."""
        self.directory = directory
        self.checkpoint_id = checkpoint_id
        self.kind = kind
        self._base = base
        self._root = root
        self._retain = retain
        self.target = CheckpointTarget(directory, checkpoint_id, root, policy, full, native)
        """What a task elsewhere needs to write its part (picklable; see :mod:`.target`)."""
        self._change_sets: list[ChangeSet] = []
        self._bases: dict[tuple[int | None, str], BaseChain | None] = {}
        self._lock = threading.Lock()
        self._results: list[SubtaskResult] = []
        self._futures: list[Future[SubtaskResult]] = []
        self._status = PendingStatus.OPEN
        self._status_lock = threading.RLock()
        self._in_flight = in_flight
        self._base_files: dict[int, set[str]] = {}

    @property
    def status(self) -> PendingStatus:
        return self._status

    @property
    def incremental(self) -> bool:
        """Whether keyed state is written as increments where it can be."""
        return self.target.policy is not None and not self.target.full

    def _require_open(self, action: str) -> None:
        if self._status is not PendingStatus.OPEN:
            raise CheckpointStateError(
                f"cannot {action} checkpoint {self.checkpoint_id}: it is {self._status.value}"
            )

    def writer(self, uid: str, subtask: int, parallelism: int, max_parallelism: int) -> SubtaskWriter:
        self._require_open("write to")
        return self.target.writer(uid, subtask, parallelism, max_parallelism)

    def snapshot(
        self,
        backend: AbstractKeyedStateBackend,
        uid: str | None = None,
        subtask: int = 0,
        parallelism: int = 1,
    ) -> KeyedStateSnapshot:
        """The synchronous part: ``backend``'s snapshot (with its changes when recording;
        see :meth:`CheckpointTarget.snapshot`); its changes are confirmed when this
        checkpoint commits."""
        with self._status_lock:
            self._require_open("snapshot for")
            snap = self.target.snapshot(backend, uid, subtask, parallelism)
            if snap.changes is not None:
                self._change_sets.append(snap.changes)
        return snap

    def base_of(self, uid: str, snapshot: KeyedStateSnapshot | None) -> BaseChain | None:
        """The checkpoint ``snapshot``'s changes build on (loaded once per base and operator)."""
        base_id = None if snapshot is None or snapshot.changes is None else snapshot.changes.base
        with self._lock:
            if (base_id, uid) not in self._bases:
                self._bases[(base_id, uid)] = self.target.base_of(uid, snapshot)
            return self._bases[(base_id, uid)]

    def write_keyed(
        self, uid: str, backend: AbstractKeyedStateBackend, subtask: int = 0, parallelism: int = 1
    ) -> Future[SubtaskResult]:
        """Snapshot ``backend`` now (the synchronous part) and write it in the background."""
        snapshot = self.snapshot(backend, uid, subtask, parallelism)
        return self.write_snapshot(uid, snapshot, subtask, parallelism)

    def write_snapshot(
        self, uid: str, snapshot: KeyedStateSnapshot, subtask: int = 0, parallelism: int = 1
    ) -> Future[SubtaskResult]:
        """Write a snapshot :meth:`snapshot` took, in the background (the asynchronous part;
        as in Flink, handing it over is not part of the synchronous one). The snapshot is
        released once written, or at once when this checkpoint takes no more writes."""
        if snapshot.changes is not None and all(c is not snapshot.changes for c in self._change_sets):
            raise CheckpointError(
                f"this snapshot was not taken for checkpoint {self.checkpoint_id} (take it with "
                "its snapshot())",
                code="INVALID_ARGUMENT",
            )
        return self._submit(uid, subtask, parallelism, snapshot)

    def write_operator(
        self,
        uid: str,
        backend: OperatorStateBackend,
        subtask: int = 0,
        parallelism: int = 1,
        max_parallelism: int = 128,
    ) -> Future[SubtaskResult]:
        self._require_open("write to")
        states = backend.snapshot()
        return self._submit(uid, subtask, parallelism, None, max_parallelism=max_parallelism, operator=states)

    def write_subtask(
        self,
        uid: str,
        subtask: int,
        parallelism: int,
        max_parallelism: int,
        *,
        keyed: AbstractKeyedStateBackend | None = None,
        operator: OperatorStateBackend | None = None,
        raw_keyed: Mapping[int, bytes] | None = None,
        raw_operator: Iterable[bytes] | None = None,
        key_group_range: KeyGroupRange | None = None,
    ) -> Future[SubtaskResult]:
        """Everything one subtask has: keyed, operator and raw state, in one result."""
        self._require_open("write to")
        snapshot = None if keyed is None else self.snapshot(keyed, uid, subtask, parallelism)
        try:
            states = None if operator is None else operator.snapshot()
        except BaseException:
            if snapshot is not None:
                snapshot.release()
            raise
        raw_k = None if raw_keyed is None else dict(raw_keyed)
        raw_o = None if raw_operator is None else list(raw_operator)
        return self._submit(uid, subtask, parallelism, snapshot, max_parallelism=max_parallelism,
                            operator=states, raw_keyed=raw_k, raw_operator=raw_o,
                            key_group_range=key_group_range)  # fmt: skip

    def _submit(
        self, uid: str, subtask: int, parallelism: int, snapshot: KeyedStateSnapshot | None, **parts: Any
    ) -> Future[SubtaskResult]:
        """Write through the target's one path (:meth:`CheckpointTarget.write_snapshot`), in
        the background; ``snapshot`` is released there, or here when it cannot be handed over."""
        write = partial(self.target.write_snapshot, uid, subtask, parallelism, snapshot, base_of=self.base_of,
                        **parts)  # fmt: skip
        with self._status_lock:
            try:
                self._require_open("write to")
                future = writers().submit(write)
            except BaseException:
                if snapshot is not None:
                    snapshot.release()
                raise
            self._futures.append(future)
        return future

    def add(self, result: SubtaskResult) -> None:
        """Record a subtask result produced elsewhere (e.g. by a Spark task)."""
        with self._status_lock:
            self._require_open("add a result to")
            self._results.append(result)

    def holds(self) -> set[str]:
        """Root-relative paths of earlier checkpoints' files this one references or may: its
        bases' (manifests included) and those its finished writes reference."""
        held: set[str] = set()
        if self._root is not None:
            for base_id in {c.base for c in self._change_sets if c.base is not None}:
                if base_id not in self._base_files:
                    self._base_files[base_id] = base_files(self._root, base_id)
                held |= self._base_files[base_id]
        own = f"chk-{self.checkpoint_id}"
        done = (f.result() for f in self._futures if f.done() and not f.cancelled() and not f.exception())
        for result in (*self._results, *done):
            held |= {posixpath.normpath(posixpath.join(own, f.path)) for f in result.entry.files()}
        return held

    def commit(self, properties: Mapping[str, str] | None = None) -> CompletedCheckpoint:
        """Wait for every write, refuse an unsound manifest (see :func:`.inflight.refuse_unsound`),
        then publish it (see :func:`publish_manifest`: first, the files the results wrote must
        be there with their recorded sizes).

        Any error is re-raised. Before publishing (a write, the manifest's checks), the
        attempt is aborted first (``ABORTED``: its files deleted); when a file the results
        wrote is missing or not whole (``[COMMIT_FILES_MISSING]``) or another committer's
        manifest is there, ``ABORTED`` too (:func:`publish_manifest` deleted them); when
        publishing fails otherwise, ``FAILED``: the manifest may still land, so its files stay."""
        with self._status_lock:
            self._require_open("commit")
            try:
                results = self._results + [f.result() for f in self._futures]
                manifest = build_manifest(self.checkpoint_id, self.kind, results, properties, self._base)
                refuse_unsound(self.directory, self._root, manifest, self._change_sets)
            except BaseException:
                self.abort()
                raise
            in_flight = None
            if self._in_flight is not None:
                self._in_flight.discard(self)
                in_flight = self._in_flight.held()
            written = [p for r in results for p in r.written]
            try:
                publish_manifest(self.directory, manifest, written, root=self._root, retain=self._retain,
                                 in_flight=in_flight)  # fmt: skip
            except (CommitFilesMissingError, CheckpointExistsError):  # nothing published; ours are deleted
                self._status = PendingStatus.ABORTED
                raise
            except BaseException:
                self._status = PendingStatus.FAILED
                raise
            self._status = PendingStatus.COMMITTED
        for changes in self._change_sets:  # only now: a failed commit leaves them for the next
            changes.confirm(self.checkpoint_id)
        return CompletedCheckpoint(self.directory, manifest)

    def abort(self) -> None:
        """Delete what this attempt wrote; the previous checkpoint is untouched. Nothing to
        do when it is aborted already; an error when it committed or failed to."""
        with self._status_lock:
            if self._status is PendingStatus.ABORTED:
                return
            self._require_open("abort")
            try:
                for future in self._futures:
                    try:
                        result = future.result()
                    except Exception:
                        continue
                    self.target.discard(result)
                for result in self._results:
                    self.target.discard(result)
            finally:
                self._status = PendingStatus.ABORTED
                if self._in_flight is not None:
                    self._in_flight.discard(self)
