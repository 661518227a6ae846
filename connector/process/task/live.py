"""Where a ``process`` task's live backend comes from, and where it goes when the task ends.

A task's backend starts in one of four ways, recorded per subtask (see :data:`STARTS`):

- ``warm``: the live backend of the attempt whose results the checkpoint being continued
  committed, with nothing restored: kept by this Python worker (a heap backend, or a
  RocksDB one checkpointed as Parquet), or a RocksDB DB its executor kept (checkpointed
  natively: see :mod:`.executor`), reopened by whichever Python worker runs the task;
- ``cached``: restored from the checkpoint, with files the executor's cache held;
- ``cold``: restored from the checkpoint, every file downloaded;
- ``new``: nothing to restore (the first run, or a subtask the checkpoint lacks).

A restored backend at the checkpoint's parallelism records its changes from the restore
on, so the task writes an increment over that checkpoint, not a full copy (see
:meth:`flinkstate.checkpoint.CheckpointTarget.continue_from`). A backend is kept only after
its attempt succeeded, named by a token unique to the attempt, so state is never carried
over from an attempt that did not commit.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from flinkstate.checkpoint import CachedStorage, CheckpointCorruptError, CompletedCheckpoint
from flinkstate.state import (
    BackendOptions,
    FlinkStateError,
    RocksDBKeyedStateBackend,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.operator import OperatorStateBackend
from flinkstate.state.process import KeyedProcessOperator
from flinkstate.state.ttl import LONG_MIN

from .executor import ExecutorStore, Slot

if TYPE_CHECKING:
    from .plan import TaskPlan

STARTS = ("warm", "cached", "cold", "new")
"""How a subtask's backend started (module docstring)."""


@dataclass
class _Kept:
    token: str
    """Names the attempt whose results held this backend's state (unique per attempt)."""
    backend: BackendOptions
    """The options its backend was built with: reused only for a run with equal ones."""
    operator: KeyedProcessOperator
    directory: str | None


_KEPT: dict[tuple[str, str, int], _Kept] = {}
"""Live subtasks this Python worker kept: (checkpoint root, uid, subtask) -> the last run's."""
MAX_KEPT = 8
"""At most this many are kept per worker (the least recently stored go first)."""


def forget_kept() -> None:
    """Close and remove every backend this Python worker kept (as its exit would)."""
    while _KEPT:
        _discard(_KEPT.popitem()[1])


def _discard(kept: _Kept) -> None:
    kept.operator.backend.close()
    if kept.directory is not None:
        shutil.rmtree(kept.directory, ignore_errors=True)


@dataclass
class Live:
    """A task's live subtask: its operator, where its backend's files are, how it started."""

    operator: KeyedProcessOperator
    directory: str | None
    """The backend's own working directory (removed when it is not kept)."""
    slot: Slot | None
    """The executor's slot the backend's DB goes back to at the end (native RocksDB)."""
    start: str
    downloaded: int = 0
    """Bytes of checkpoint files the restore downloaded."""

    def keep(self, plan: TaskPlan, subtask: int, attempt: str, store: ExecutorStore | None) -> None:
        """The attempt succeeded: keep its backend for the next run (closed into the
        executor's slot, or held by this Python worker)."""
        if self.slot is not None:
            backend = self.operator.backend
            assert isinstance(backend, RocksDBKeyedStateBackend)
            try:
                backend.close_keeping(self.slot.db)
                self.slot.keep(_record(plan, subtask, attempt))
            finally:
                self.slot.release()
            if store is not None:
                store.trim(keep=self.slot)
            return
        _KEPT[(plan.root_url, plan.uid, subtask)] = _Kept(
            attempt, plan.backend, self.operator, self.directory
        )
        while len(_KEPT) > MAX_KEPT:
            _discard(_KEPT.pop(next(iter(_KEPT))))

    def drop(self) -> None:
        """The attempt failed: nothing it held is kept."""
        try:
            self.operator.backend.close()
        finally:
            if self.slot is not None:
                self.slot.clear()
                self.slot.release()
            if self.directory is not None:
                shutil.rmtree(self.directory, ignore_errors=True)


def _record(plan: TaskPlan, subtask: int, attempt: str) -> dict[str, Any]:
    """What a slot holds: the attempt's state of this subtask, as this run's backend builds it."""
    return {
        "attempt": attempt,
        "backend": repr(plan.backend),
        "root": plan.root_url,
        "uid": plan.uid,
        "subtask": subtask,
        "parallelism": plan.parallelism,
        "max_parallelism": plan.max_parallelism,
    }


def _drop_stale(plan: TaskPlan, committed: list[str]) -> None:
    """Forget what this worker kept of the run's operator but the attempts the checkpoint
    being continued committed, and this run's own: another worker or executor ran those
    subtasks since, so what is kept here is stale."""
    ours = f"{plan.token}."
    for key in [k for k in _KEPT if k[:2] == (plan.root_url, plan.uid)]:
        token = _KEPT[key].token
        if token not in committed and not token.startswith(ours):
            _discard(_KEPT.pop(key))


def acquire(plan: TaskPlan, subtask: int, run: dict[str, Any], store: ExecutorStore | None) -> Live:
    """The live subtask ``subtask`` for this run (module docstring); ``run``: the operator's
    per-run settings."""
    committed = (plan.base_token or "").split()  # the committed attempt of each subtask
    wanted = committed[subtask] if len(committed) == plan.parallelism else None
    _drop_stale(plan, committed)
    kept = _KEPT.pop((plan.root_url, plan.uid, subtask), None)
    if kept is not None:
        op = kept.operator
        same = (kept.token, kept.backend, op.parallelism, op.backend.max_parallelism)
        if same == (wanted, plan.backend, plan.parallelism, plan.max_parallelism):
            op.use(plan.function, **run)  # this run's settings
            if plan.base is not None:  # the checkpoint its attempt wrote has committed
                op.backend.notify_checkpoint_complete(plan.base.checkpoint_id)
            return Live(op, kept.directory, None, "warm")
        _discard(kept)
    slot = None
    if store is not None and plan.backend.kind == "rocksdb" and plan.target.native:
        slot = store.slot(plan.root_url, plan.uid, subtask)
        slot = slot if slot.claim() else None
    try:
        return _start(plan, subtask, run, store, slot, wanted)
    except BaseException:
        if slot is not None:
            slot.clear()
            slot.release()
        raise


def _directory(plan: TaskPlan, store: ExecutorStore | None, slot: Slot | None) -> str | None:
    if not plan.backend.needs_directory:
        return None
    if slot is not None:
        return slot.backend
    if store is not None:
        return store.work_directory(plan.backend.kind)
    return tempfile.mkdtemp(prefix=f"{plan.backend.kind}-", dir=_scratch())


_SCRATCH: list[tempfile.TemporaryDirectory[str]] = []


def _scratch() -> str:
    """Outside Spark: one directory for this process's backends, removed when it exits
    (nothing is kept across processes there)."""
    if not _SCRATCH:
        _SCRATCH.append(tempfile.TemporaryDirectory(prefix="flinkstate-process-"))
    return _SCRATCH[0].name


def _start(
    plan: TaskPlan,
    subtask: int,
    run: dict[str, Any],
    store: ExecutorStore | None,
    slot: Slot | None,
    wanted: str | None,
) -> Live:
    held = None if slot is None else slot.take()
    directory = _directory(plan, store, slot)
    factory = partial(plan.backend.make, path=directory)
    p, max_p = plan.parallelism, plan.max_parallelism
    start, downloaded = "new", 0
    try:
        if plan.base is not None and plan.base.operator(plan.uid) is not None:
            assert plan.base_directory is not None
            base: CompletedCheckpoint | None = None
            if slot is not None and wanted is not None and held == _record(plan, subtask, wanted):
                base, backend = _reopen(plan, subtask, factory, slot)
                start = "warm"
            if base is None:  # nothing kept, or the kept DB did not open: restore
                if slot is not None:
                    slot.clear()
                base, backend, start, downloaded = _restore(plan, subtask, factory, store)
                plan.target.continue_from(backend, base, plan.uid, subtask, p)
            operator_state = base.operator_backend(plan.uid, subtask, p)
        else:
            rng = compute_key_group_range_for_operator_index(max_p, p, subtask)
            backend = factory(key_type=plan.key_type, max_parallelism=max_p, key_group_range=rng)
            operator_state = OperatorStateBackend()
    except BaseException:
        if directory is not None and slot is None:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    if plan.watermark > LONG_MIN:
        backend.advance_watermark(plan.watermark)
    operator = KeyedProcessOperator(
        plan.function, backend, operator_state, subtask=subtask, parallelism=p, **run
    )
    return Live(operator, directory, slot, start, downloaded)


def _reopen(plan: TaskPlan, subtask: int, factory: Any, slot: Slot) -> tuple[CompletedCheckpoint | None, Any]:
    """(the base checkpoint, the backend on the slot's kept DB); ``(None, None)`` when the kept
    DB does not open (the checkpoint then decides)."""
    assert plan.base is not None and plan.base_directory is not None
    base = CompletedCheckpoint(plan.base_directory, plan.base, allow_pickle=True)
    try:
        return base, base.reopen_keyed(plan.uid, subtask, plan.parallelism, factory, slot.db,
                                       key_type=plan.key_type)  # fmt: skip
    except FlinkStateError:
        return None, None


def _restore(
    plan: TaskPlan, subtask: int, factory: Any, store: ExecutorStore | None
) -> tuple[CompletedCheckpoint, Any, str, int]:
    """(the base checkpoint, the backend restored from it, ``cached`` or ``cold``, bytes
    downloaded): through the executor's cache when there is one; a cached copy that fails
    its check is dropped and the restore done again from the storage."""
    assert plan.base is not None and plan.base_directory is not None
    plain = plan.base_directory
    if store is not None:
        cached: CachedStorage = store.cache.storage(plain)
        base = CompletedCheckpoint(cached, plan.base, allow_pickle=True)
        try:
            backend = base.keyed_backend(plan.uid, subtask, plan.parallelism, factory, key_type=plan.key_type)
        except CheckpointCorruptError:
            if not cached.use.served:
                raise
            cached.forget_served()  # a bad local copy: the storage's copy decides
        else:
            use = cached.use
            return base, backend, ("cached" if use.served else "cold"), use.downloaded
    before = plain.bytes_read
    base = CompletedCheckpoint(plain, plan.base, allow_pickle=True)
    backend = base.keyed_backend(plan.uid, subtask, plan.parallelism, factory, key_type=plan.key_type)
    return base, backend, "cold", plain.bytes_read - before
