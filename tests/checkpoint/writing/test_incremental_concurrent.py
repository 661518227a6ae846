"""Several checkpoints in flight, retention, and commits that must not publish.

Retention after a commit never deletes what a checkpoint still in flight from the same
storage references or wrote; a checkpoint committed after a later one completed is
discarded (``[CHECKPOINT_SUBSUMED]``); a commit whose earlier files are gone is refused
(``[INCREMENT_BASE_MISSING]``) and the next checkpoint writes those states in full.
Every checkpoint that completes restores what the backend held when it was taken.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import dump

from flinkstate.checkpoint import CheckpointError, CheckpointStorage
from flinkstate.checkpoint.reading.restore import CompletedCheckpoint
from flinkstate.state import AbstractKeyedStateBackend, ListStateDescriptor, Types, ValueStateDescriptor

LIST = ListStateDescriptor("l", Types.STRING())
VALUE = ValueStateDescriptor("value", Types.LONG())


def _put(backend: AbstractKeyedStateBackend, items: dict[int, int]) -> None:
    state = backend.get_state(VALUE)
    for key, value in items.items():
        backend.set_current_key(key)
        state.update(value)


def _checkpoint(storage: CheckpointStorage, backend: AbstractKeyedStateBackend) -> CompletedCheckpoint:
    pending = storage.begin()
    pending.write_keyed("op", backend)
    return pending.commit()


def _restored(done: CompletedCheckpoint) -> dict[Any, Any]:
    return dump(done.keyed_backend("op", 0, 1))


def test_two_checkpoints_in_flight_keep_the_base_they_build_on(
    make_backend: Any, location: tuple[str, dict[str, Any]]
) -> None:
    """Checkpoints 2 and 3 both build on 1; 2 compacts the state, 3 extends 1's chain.
    Committing 2 (retain=1) must leave 1's files, which 3 references, in place."""
    url, options = location
    storage = CheckpointStorage(url, options, retain=1, incremental=True, max_chain_bytes_ratio=1.0)
    backend = make_backend(key_type=Types.LONG(), max_parallelism=8)
    state = backend.get_list_state(LIST)
    for k in range(50):
        backend.set_current_key(k)
        state.add(f"v{k}")
    _checkpoint(storage, backend)
    backend.set_current_key(7)
    state.update(["x" * 200_000])  # a delta larger than the base: 2 compacts
    second = storage.begin(2)
    second.write_keyed("op", backend).result()
    state.update(["short"])  # a small delta: 3 extends 1's chain
    third = storage.begin(3)
    third.write_keyed("op", backend).result()
    at_third = dump(backend)
    assert [f.checkpoint_id for f in _chain(second.commit())] == [2]
    done = third.commit()
    assert [f.checkpoint_id for f in _chain(done)] == [1, 3]
    assert storage.completed_ids() == [3]
    assert _restored(storage.load()) == at_third
    assert storage.cleanup(dry_run=True).deleted == ()


def _chain(done: CompletedCheckpoint, name: str = "l") -> tuple[Any, ...]:
    return done.manifest.operator("op").subtasks[0].keyed[name]


def test_a_lower_checkpoint_in_flight_keeps_its_files_and_is_then_subsumed(
    make_backend: Any, tmp_path: Path
) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), retain=1, incremental=True)
    backend = make_backend(key_type=Types.LONG(), max_parallelism=8)
    _put(backend, {k: k for k in range(100)})
    _checkpoint(storage, backend)
    _put(backend, {1: -1})
    lower = storage.begin()
    lower.write_keyed("op", backend).result()
    written = sorted(p.name for p in (tmp_path / "chk" / f"chk-{lower.checkpoint_id}").iterdir())
    assert written
    _put(backend, {2: -2})
    at_higher = dump(backend)
    higher = _checkpoint(storage, backend)
    assert sorted(p.name for p in (tmp_path / "chk" / f"chk-{lower.checkpoint_id}").iterdir()) == written
    with pytest.raises(CheckpointError, match=rf"\[CHECKPOINT_SUBSUMED\].*{higher.checkpoint_id}"):
        lower.commit()
    assert not list((tmp_path / "chk" / f"chk-{lower.checkpoint_id}").glob("*"))  # the attempt's files
    assert storage.latest_id() == higher.checkpoint_id
    assert _restored(storage.load()) == at_higher
    _put(backend, {3: -3})
    after = _checkpoint(storage, backend)
    assert after.manifest.incremental and _restored(after) == dump(backend)
    assert storage.completed_ids() == [after.checkpoint_id]  # what the lower one held is gone now


def test_a_commit_whose_earlier_files_are_gone_is_refused_and_the_next_writes_them_in_full(
    make_backend: Any, location: tuple[str, dict[str, Any]]
) -> None:
    """Files of the base deleted behind the storage's back (another process, by hand)."""
    url, options = location
    storage = CheckpointStorage(url, options, retain=3, incremental=True, max_chain_bytes_ratio=100.0)
    backend = make_backend(key_type=Types.LONG(), max_parallelism=8)
    _put(backend, {k: k for k in range(100)})
    first = _checkpoint(storage, backend)
    _put(backend, {1: -1})
    second = _checkpoint(storage, backend)
    base = _chain(second, "value")[0]
    assert base.checkpoint_id == first.checkpoint_id
    storage.storage.delete(posixpath.normpath(posixpath.join(f"chk-{second.checkpoint_id}", base.path)))
    _put(backend, {5: 55})
    pending = storage.begin()
    pending.write_keyed("op", backend)
    with pytest.raises(CheckpointError, match=r"\[INCREMENT_BASE_MISSING\].*'value'"):
        pending.commit()
    assert storage.latest_id() == second.checkpoint_id  # nothing unrestorable published
    _put(backend, {6: 66})
    done = _checkpoint(storage, backend)
    assert [(f.checkpoint_id, f.delta) for f in _chain(done, "value")] == [(done.checkpoint_id, False)]
    assert _restored(done) == dump(backend)  # the changes of the refused one too
