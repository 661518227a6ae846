"""Increments taken without freezing the state: a heap state of immutable values whose
base went to the same place is snapshot as its change record alone.

Each test checks which states were left unfrozen and that every checkpoint restores what
the live backend holds (the model), including where the writer then needs what it was
not given: a compaction, a lost base, a state empty in its base.
"""

from __future__ import annotations

import multiprocessing
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import dump
from incremental_ops import checkpoint_now

from flinkstate.checkpoint import CheckpointError, CheckpointStorage
from flinkstate.checkpoint.reading.restore import CompletedCheckpoint
from flinkstate.checkpoint.writing import pending as pending_module
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    StateAccessError,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
)

VALUE = ValueStateDescriptor("value", Types.LONG())
NAMES = ValueStateDescriptor("names", Types.STRING())
LIST = ListStateDescriptor("list", Types.LONG())


def _ttl_full() -> ValueStateDescriptor:
    desc = ValueStateDescriptor("ttl_full", Types.LONG())
    desc.enable_time_to_live(StateTtlConfig.new_builder(timedelta(hours=1)).cleanup_full_snapshot().build())
    return desc


@pytest.fixture(params=[True, False], ids=["heap-cow", "heap-nested"])
def backend(request: pytest.FixtureRequest) -> Any:
    b = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=8, async_snapshots=request.param)
    yield b
    b.close()


def _write(backend: HeapKeyedStateBackend, desc: Any, items: dict[int, Any]) -> None:
    state = (
        backend.get_state(desc) if not isinstance(desc, ListStateDescriptor) else backend.get_list_state(desc)
    )
    for key, value in items.items():
        backend.set_current_key(key)
        if isinstance(desc, ListStateDescriptor):
            state.add(value)
        else:
            state.update(value)


def _restored(done: CompletedCheckpoint) -> dict[Any, Any]:
    return dump(done.keyed_backend("op", 0, 1))


def _unfrozen(storage: CheckpointStorage, backend: HeapKeyedStateBackend, uid: str = "op") -> set[str]:
    """The states an increment to ``uid`` would leave unfrozen (the snapshot is then aborted)."""
    pending = storage.begin()
    snap = pending.snapshot(backend, uid, 0, 1)
    try:
        return {name for name, state in snap.states.items() if state.changes_only}
    finally:
        snap.release()
        pending.abort()


def test_only_immutable_states_with_their_base_in_the_same_place_stay_unfrozen(
    backend: HeapKeyedStateBackend, tmp_path: Path
) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), incremental=True)
    _write(backend, VALUE, {k: k for k in range(50)})
    _write(backend, LIST, {k: k for k in range(50)})
    _write(backend, _ttl_full(), {k: k for k in range(50)})
    assert _unfrozen(storage, backend) == set()  # the first checkpoint: no base
    checkpoint_now(storage, backend)
    assert _unfrozen(storage, backend) == {"value"}  # a list is mutable; full-snapshot TTL
    assert _unfrozen(storage, backend, uid="other") == set()  # another operator: another base
    elsewhere = CheckpointStorage(str(tmp_path / "elsewhere"), incremental=True)
    assert _unfrozen(elsewhere, backend) == set()  # another storage: its base is not ours
    pending = storage.begin(incremental=False)
    snap = pending.snapshot(backend, "op", 0, 1)
    assert not any(s.changes_only for s in snap.states.values())  # asked to be written in full
    snap.release()
    pending.abort()
    _write(backend, NAMES, {1: "ключ"})  # a state new since the base
    assert _unfrozen(storage, backend) == {"value"}
    with backend.snapshot_for_checkpoint(99) as direct:  # no scope given: nothing to build on
        assert not any(s.changes_only for s in direct.states.values())


def test_a_state_whose_description_changed_is_frozen(backend: HeapKeyedStateBackend, tmp_path: Path) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), incremental=True)
    _write(backend, VALUE, {k: k for k in range(20)})
    checkpoint_now(storage, backend)
    state = backend.get_state(VALUE)
    backend.set_current_key(3)
    state.set_current_namespace("window-1")  # the namespace type is fixed now: not the base's
    state.update(7)
    assert _unfrozen(storage, backend) == set()
    done = checkpoint_now(storage, backend)
    assert _restored(done) == dump(backend)
    assert _unfrozen(storage, backend) == {"value"}


def test_an_unfrozen_snapshot_reads_only_its_changes(backend: HeapKeyedStateBackend, tmp_path: Path) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), incremental=True)
    _write(backend, VALUE, {k: k for k in range(20)})
    checkpoint_now(storage, backend)
    _write(backend, VALUE, {1: 100, 25: 125})
    backend.set_current_key(2)
    backend.get_state(VALUE).clear()
    pending = storage.begin()
    snap = pending.snapshot(backend, "op", 0, 1)
    _write(backend, VALUE, {1: -1, 2: -2, 25: -25})  # after the snapshot: not in it
    state = snap.states["value"]
    assert state.changes_only
    with pytest.raises(StateAccessError, match="SNAPSHOT_CHANGES_ONLY"):
        state.columns(0)
    assert snap.changes is not None
    upserts: dict[Any, Any] = {}
    deletes: set[Any] = set()
    for kg in snap.key_group_range:
        entries = state.changed_entries(kg, snap.changes.changed("value", kg))
        upserts |= dict(zip(entries.upserts.keys, entries.upserts.values, strict=True))
        deletes |= set(entries.deletes.keys)
    assert (upserts, deletes) == ({1: 100, 25: 125}, {2})
    snap.release()
    with pytest.raises(StateAccessError, match="SNAPSHOT_RELEASED"):
        state.changed_entries(0, {})
    pending.abort()


def test_the_chain_bound_compacts_at_the_next_checkpoint(
    backend: HeapKeyedStateBackend, tmp_path: Path
) -> None:
    """An unfrozen state cannot be compacted where it is written: its increment is kept (the
    bytes bound passed by that one increment at most) and the next checkpoint freezes it
    and compacts. The files bound is kept exactly: the state is frozen ahead of it."""
    storage = CheckpointStorage(str(tmp_path / "chk"), incremental=True, max_chain_bytes_ratio=0.5)
    _write(backend, VALUE, {k: k for k in range(1_000)})
    checkpoint_now(storage, backend)
    _write(backend, VALUE, {k: -k for k in range(900)})  # a delta about as large as the base
    assert _unfrozen(storage, backend) == {"value"}
    over = checkpoint_now(storage, backend)
    chain = over.manifest.operator("op").subtasks[0].keyed["value"]
    assert [(f.checkpoint_id, f.delta) for f in chain] == [(1, False), (over.checkpoint_id, True)]
    assert _restored(over) == dump(backend)
    assert _unfrozen(storage, backend) == set()  # asked for by the writer
    _write(backend, VALUE, {5: 5})
    compacted = checkpoint_now(storage, backend)
    chain = compacted.manifest.operator("op").subtasks[0].keyed["value"]
    assert [(f.checkpoint_id, f.delta) for f in chain] == [(compacted.checkpoint_id, False)]
    assert _restored(compacted) == dump(backend)
    assert _unfrozen(storage, backend) == {"value"}


def test_a_lost_base_fails_the_increment_and_the_next_is_written_in_full(
    backend: HeapKeyedStateBackend, tmp_path: Path
) -> None:
    storage = CheckpointStorage(
        str(tmp_path / "chk"), incremental=True, retain=5, max_chain_bytes_ratio=100.0
    )
    _write(backend, VALUE, {k: k for k in range(100)})
    checkpoint_now(storage, backend)
    _write(backend, VALUE, {k: 2 * k for k in range(10)})
    base = checkpoint_now(storage, backend)
    shutil.rmtree(tmp_path / "chk" / f"chk-{base.checkpoint_id}")  # deleted by hand
    _write(backend, VALUE, {k: 3 * k for k in range(5)})
    pending = storage.begin()
    pending.write_keyed("op", backend)
    with pytest.raises(CheckpointError, match=rf"INCREMENT_BASE_MISSING.*checkpoint {base.checkpoint_id}"):
        pending.commit()
    _write(backend, VALUE, {7: 70})
    assert _unfrozen(storage, backend) == set()
    done = checkpoint_now(storage, backend)
    assert not done.manifest.incremental
    assert _restored(done) == dump(backend)  # no change lost: those of the failed one too


def test_a_state_empty_in_its_base_is_written_from_its_changes(
    backend: HeapKeyedStateBackend, tmp_path: Path
) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), incremental=True)
    _write(backend, VALUE, {1: 1})
    backend.set_current_key(1)
    backend.get_state(VALUE).clear()  # registered, empty
    _write(backend, NAMES, {1: "a"})
    checkpoint_now(storage, backend)
    _write(backend, VALUE, {k: k * k for k in range(30)})
    assert "value" in _unfrozen(storage, backend)
    done = checkpoint_now(storage, backend)
    chain = done.manifest.operator("op").subtasks[0].keyed["value"]
    assert [f.delta for f in chain] == [False]
    assert _restored(done) == dump(backend)


def test_a_failed_commit_keeps_the_changes_for_the_next_increment(
    backend: HeapKeyedStateBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), incremental=True)
    _write(backend, VALUE, {k: k for k in range(100)})
    checkpoint_now(storage, backend)
    _write(backend, VALUE, {1: -1, 2: -2})
    with monkeypatch.context() as mp:
        mp.setattr(pending_module, "publish_manifest", _failing_publish)
        with pytest.raises(CheckpointError, match="injected"):
            checkpoint_now(storage, backend)
    _write(backend, VALUE, {2: 22, 3: -3})
    assert _unfrozen(storage, backend) == {"value"}
    done = checkpoint_now(storage, backend)
    assert done.manifest.incremental
    assert _restored(done) == dump(backend)


def _failing_publish(*args: Any, **kwargs: Any) -> None:
    raise CheckpointError("injected commit failure", code="WRITE_FAILED")


def _checkpoint_in_child(path: str) -> int:
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=8)
    _write(backend, VALUE, {k: k for k in range(10)})
    return checkpoint_now(CheckpointStorage(path, incremental=True), backend).checkpoint_id


def test_a_forked_child_writes_checkpoints_with_threads_of_its_own(tmp_path: Path) -> None:
    """The writer threads are started once per process; a forked child (a Spark Python
    worker) inherits the pool but not its threads, and must not wait on them."""
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=8)
    _write(backend, VALUE, {1: 1})
    checkpoint_now(CheckpointStorage(str(tmp_path / "parent")), backend)  # the parent's threads run
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_checkpoint_in_child, (str(tmp_path / "child"),)).get(timeout=60) == 1


def test_a_snapshot_written_later_holds_the_moment_it_was_taken(
    backend: HeapKeyedStateBackend, tmp_path: Path
) -> None:
    """``snapshot()`` is the synchronous part and ``write_snapshot()`` hands it to the writer
    threads, as Flink splits them: writes between the two are not in the checkpoint, and
    the next increment carries them."""
    storage = CheckpointStorage(str(tmp_path / "chk"), incremental=True)
    _write(backend, VALUE, {k: k for k in range(50)})
    checkpoint_now(storage, backend)
    _write(backend, VALUE, {1: -1, 2: -2})
    taken = dump(backend)
    pending = storage.begin()
    snap = pending.snapshot(backend, "op", 0, 1)
    assert {name for name, state in snap.states.items() if state.changes_only} == {"value"}
    _write(backend, VALUE, {2: 22, 3: -3})
    pending.write_snapshot("op", snap, 0, 1)
    done = pending.commit()
    assert done.manifest.incremental and _restored(done) == taken
    assert _restored(checkpoint_now(storage, backend)) == dump(backend)


def test_a_snapshot_is_written_only_by_the_checkpoint_it_was_taken_for(
    backend: HeapKeyedStateBackend, tmp_path: Path
) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), incremental=True)
    _write(backend, VALUE, {1: 1})
    first = storage.begin()
    snap = first.snapshot(backend, "op", 0, 1)
    other = storage.begin(first.checkpoint_id + 1)
    with pytest.raises(CheckpointError, match=r"\[INVALID_ARGUMENT\].*not taken for checkpoint"):
        other.write_snapshot("op", snap)
    first.write_snapshot("op", snap)
    assert _restored(first.commit()) == dump(backend)
    other.abort()
