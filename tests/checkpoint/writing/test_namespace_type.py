"""A state's namespace type is decided once, at its first use with a namespace, and kept
across checkpoints, restores and increments (issue 37).

Random programs (every state kind, TTL, full and incremental checkpoints, restores from any
retained checkpoint, one or two subtasks) use each state with int namespaces up to a random
step and in the void namespace only after it: every commit succeeds and every checkpoint
restores exactly what the live backends held when it was taken (the model).
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import dump
from incremental_ops import Workload, descriptors

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.state import (
    AbstractKeyedStateBackend,
    HeapKeyedStateBackend,
    StateTypeError,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.ttl.time import ManualTimeProvider

MAX_P = 8
NAMESPACED = ["value", "list", "map", "sum", "ttl_value", "ttl_list", "ttl_map", "ttl_full"]

Factory = Callable[[int, int, ManualTimeProvider], AbstractKeyedStateBackend]


@pytest.fixture(autouse=True)
def _temporary_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RocksDB's working directories (``tempfile.mkdtemp``) go under the test's ``tmp_path``."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def _heap(subtask: int, parallelism: int, clock: ManualTimeProvider) -> AbstractKeyedStateBackend:
    rng = compute_key_group_range_for_operator_index(MAX_P, parallelism, subtask)
    return HeapKeyedStateBackend(Types.LONG(), MAX_P, rng, clock)


def _rocksdb(subtask: int, parallelism: int, clock: ManualTimeProvider) -> AbstractKeyedStateBackend:
    from flinkstate.state.rocksdb import RocksDBKeyedStateBackend

    rng = compute_key_group_range_for_operator_index(MAX_P, parallelism, subtask)
    return RocksDBKeyedStateBackend(tempfile.mkdtemp(), Types.LONG(), MAX_P, rng, clock)


def _restore(kind: str, done: CompletedCheckpoint, i: int, p: int, clock: ManualTimeProvider) -> Any:
    if kind == "heap":
        return done.keyed_backend("op", i, p, time_provider=clock)
    from flinkstate.state.rocksdb import RocksDBKeyedStateBackend

    path = tempfile.mkdtemp()
    return done.keyed_backend("op", i, p, RocksDBKeyedStateBackend, path=path, time_provider=clock)


def _use(rnd: random.Random, backend: AbstractKeyedStateBackend, namespace: Any, step: int) -> None:
    desc = descriptors()[rnd.choice(NAMESPACED)]
    state: Any = backend.get_partitioned_state(namespace, desc)
    name = desc.name
    if rnd.random() < 0.3:
        state.clear()
    elif name in ("value", "ttl_full"):
        state.update(step)
    elif name == "ttl_value":
        state.update(f"é{step}")
    elif name in ("list", "ttl_list"):
        state.add("a" if name == "list" else step)
    elif name == "sum":
        state.add(3)
    else:
        state.put(f"k{step % 3}", step)


def _program(seed: int, kind: str, parallelism: int, root: Path) -> int:
    """Run one random program; return the checkpoints it committed and checked."""
    rnd = random.Random(seed)
    clock = ManualTimeProvider(0)
    storage = CheckpointStorage(str(root), incremental=True, retain=1000)
    factory = _heap if kind == "heap" else _rocksdb
    backends = [factory(i, parallelism, clock) for i in range(parallelism)]
    keys = [
        [k for k in range(60) if assign_to_key_group(k, MAX_P) in b.key_group_range][:6] for b in backends
    ]
    workloads = [Workload(seed * 7 + i, keys[i], clock) for i in range(parallelism)]
    done: list[CompletedCheckpoint] = []
    steps = rnd.randrange(10, 60)
    switch = rnd.randrange(steps)  # int namespaces before, the void namespace only after
    for step in range(steps):
        r, i = rnd.random(), rnd.randrange(parallelism)
        if r < 0.12:
            pending = storage.begin(incremental=rnd.random() < 0.8)
            for j, b in enumerate(backends):
                pending.write_keyed("op", b, j, parallelism)
            model = [dump(b) for b in backends]
            done.append(pending.commit())
            restored = [_restore(kind, done[-1], j, parallelism, clock) for j in range(parallelism)]
            assert [dump(b) for b in restored] == model, (seed, step)
            for b in restored:
                b.close()
        elif r < 0.16 and done:
            chosen = rnd.choice(done)
            for b in backends:
                b.close()
            backends = [_restore(kind, chosen, j, parallelism, clock) for j in range(parallelism)]
        elif r < 0.45:
            backends[i].set_current_key(rnd.choice(keys[i]))
            _use(rnd, backends[i], rnd.randrange(3) if step < switch else None, step)
        else:
            workloads[i].step(backends[i])
    for b in backends:
        b.close()
    return len(done)


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("kind", ["heap", "rocksdb"])
def test_random_programs_typed_then_void_namespaces(kind: str, parallelism: int, tmp_path: Path) -> None:
    if kind == "rocksdb":
        pytest.importorskip("rocksdict")
    checked = sum(_program(seed, kind, parallelism, tmp_path / str(seed)) for seed in range(30))
    assert checked > 30  # the programs committed checkpoints, each restored and compared


@pytest.mark.parametrize("kind", ["heap", "rocksdb"])
def test_the_type_outlives_a_restore_of_a_state_without_entries(kind: str, tmp_path: Path) -> None:
    """A state whose namespaced entries were all cleared keeps its type through a restore:
    the next checkpoint records it, and a namespace of another type is refused at the call."""
    if kind == "rocksdb":
        pytest.importorskip("rocksdict")
    clock = ManualTimeProvider(0)
    storage = CheckpointStorage(str(tmp_path), incremental=True)
    desc = ValueStateDescriptor("v", Types.LONG())
    backend = (_heap if kind == "heap" else _rocksdb)(0, 1, clock)
    backend.set_current_key(1)
    state = backend.get_partitioned_state(5, desc)
    state.update(1)
    state.clear()
    pending = storage.begin()
    pending.write_keyed("op", backend)
    first = pending.commit()
    assert first.operator("op").keyed_state("v").namespace_type == Types.LONG()
    restored = _restore(kind, first, 0, 1, clock)
    restored.set_current_key(2)
    restored.get_state(desc).update(3)  # the void namespace only
    pending = storage.begin()
    pending.write_keyed("op", restored)
    second = pending.commit()
    assert second.operator("op").keyed_state("v").namespace_type == Types.LONG()
    with pytest.raises(StateTypeError, match="NAMESPACE_TYPE_MISMATCH"):
        restored.get_partitioned_state("x", desc).update(4)
    restored.close()
    backend.close()
