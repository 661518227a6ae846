"""An increment is built only over the checkpoint its changes were recorded against, and a
chain never grows past its bound, whatever the sequence of checkpoints.

Every checkpoint taken is restored and compared with the live backend (the model).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import dump
from incremental_ops import checkpoint_now

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.checkpoint.reading.restore import CompletedCheckpoint
from flinkstate.checkpoint.writing.increments import ChainPolicy
from flinkstate.state import AbstractKeyedStateBackend, ListStateDescriptor, Types, ValueStateDescriptor

VALUE = ValueStateDescriptor("value", Types.LONG())  # immutable: left unfrozen on the heap
LIST = ListStateDescriptor("list", Types.STRING())  # mutable: always frozen


def _put(backend: AbstractKeyedStateBackend, items: dict[int, int]) -> None:
    state = backend.get_state(VALUE)
    for key, value in items.items():
        backend.set_current_key(key)
        state.update(value)


def _restored(done: CompletedCheckpoint, uid: str = "op") -> dict[Any, Any]:
    return dump(done.keyed_backend(uid, 0, 1))


def test_an_increment_builds_only_on_a_base_of_the_same_root(make_backend: Any, tmp_path: Path) -> None:
    """A backend checkpointed to two roots: each root's next checkpoint id is 1 past its
    own, so an id alone names another root's checkpoint, taken at another moment."""
    backend = make_backend(key_type=Types.LONG(), max_parallelism=8)
    a = CheckpointStorage(str(tmp_path / "a"), incremental=True)
    b = CheckpointStorage(str(tmp_path / "b"), incremental=True)
    _put(backend, {k: k for k in range(100, 400)} | {1: 1})
    checkpoint_now(a, backend)  # a/chk-1
    _put(backend, {2: 2})
    assert not checkpoint_now(b, backend).manifest.incremental  # b/chk-1: the backend's base now
    _put(backend, {3: 3})
    a2 = checkpoint_now(a, backend)
    assert not a2.manifest.incremental  # key 2 was recorded against b/chk-1, not a/chk-1
    assert _restored(a2) == dump(backend)
    _put(backend, {4: 4})
    a3 = checkpoint_now(a, backend)
    assert a3.manifest.incremental and _restored(a3) == dump(backend)


def test_an_increment_builds_only_on_a_base_of_the_same_operator(make_backend: Any, tmp_path: Path) -> None:
    """Written as another operator, the backend's base is that operator's entry: the next
    checkpoint as the first operator must not build on whatever that checkpoint holds for it."""
    mine = make_backend(key_type=Types.LONG(), max_parallelism=8)
    other = make_backend(key_type=Types.LONG(), max_parallelism=8)
    storage = CheckpointStorage(str(tmp_path / "chk"), incremental=True)
    _put(mine, {k: k for k in range(100)})
    checkpoint_now(storage, mine)
    _put(other, {k: -k for k in range(50)})
    pending = storage.begin()
    pending.write_keyed("other", mine)
    pending.write_keyed("op", other)  # the same checkpoint holds another backend's "op"
    pending.commit()
    _put(mine, {7: 70})
    done = checkpoint_now(storage, mine)
    assert not done.manifest.incremental
    assert _restored(done) == dump(mine)


def _chain_ok(policy: ChainPolicy, done: CompletedCheckpoint) -> None:
    """Every chain within the files bound, and within the bytes bound but for its last file."""
    for name, chain in done.manifest.operator("op").subtasks[0].keyed.items():
        assert len(chain) <= policy.max_files, (name, done.checkpoint_id, len(chain))
        assert not policy.exceeded(chain[:-1]), (name, done.checkpoint_id)


@pytest.mark.parametrize("seed", ["alternating", *range(6)])
def test_no_sequence_of_checkpoints_grows_a_chain_past_its_bound(
    make_backend: Any, tmp_path: Path, seed: Any
) -> None:
    """Checkpoints that change a state and checkpoints that do not, in any order (a state
    asked to be compacted when it did not change is compacted all the same)."""
    rng = random.Random(seed)
    files = 3 if seed == "alternating" else rng.randint(2, 5)
    ratio = 100.0 if seed == "alternating" else rng.choice([0.3, 1.0, 100.0])
    storage = CheckpointStorage(str(tmp_path / "chk"), incremental=True, retain=2, max_chain_files=files,
                                max_chain_bytes_ratio=ratio)  # fmt: skip
    backend = make_backend(key_type=Types.LONG(), max_parallelism=8)
    _put(backend, {k: k for k in range(500)})
    listed = backend.get_list_state(LIST)
    for k in range(0, 500, 5):
        backend.set_current_key(k)
        listed.add(f"v{k}")
    checkpoint_now(storage, backend)
    for i in range(16):
        changed = i % 2 == 0 if seed == "alternating" else rng.random() < 0.5
        if changed:
            _put(backend, {rng.randrange(600): -i for _ in range(rng.choice([1, 5, 40, 200]))})
            backend.set_current_key(rng.randrange(500))
            if rng.random() < 0.5:
                listed.add(f"w{i}")
        done = checkpoint_now(storage, backend)
        _chain_ok(storage.policy, done)
        assert _restored(done) == dump(backend)
