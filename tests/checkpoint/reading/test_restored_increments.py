"""A backend restored from a checkpoint of its own subtask continues that checkpoint's
chain: the next checkpoint is an increment over it, with exactly what changed since the
restore. On every keyed backend and every storage (memory, local, S3), against a model;
and never when the restored checkpoint is not that subtask's (another parallelism, another
root, full checkpoints asked for, a native RocksDB snapshot)."""

from __future__ import annotations

import tempfile
from functools import cache
from typing import Any

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.state import ListStateDescriptor, MapStateDescriptor, Types, ValueStateDescriptor
from flinkstate.state.keyed.backend import AbstractKeyedStateBackend

COUNT = ValueStateDescriptor("count", Types.LONG())
SEEN = ListStateDescriptor("seen", Types.STRING())
TAGS = MapStateDescriptor("tags", Types.STRING(), Types.INT())
KEYS = [f"k{i}" for i in range(2000)] + ["ü", "日本", ""]


def _apply(backend: AbstractKeyedStateBackend, model: dict[str, Any], key: str, n: int | None) -> None:
    """Set ``key``'s states (``None``: clear them) in ``backend`` and ``model``, when the
    backend owns the key."""
    if key not in _owned(backend):
        return
    backend.set_current_key(key)
    states = backend.get_state(COUNT), backend.get_list_state(SEEN), backend.get_map_state(TAGS)
    if n is None:
        for state in states:
            state.clear()
        model.pop(key, None)
        return
    states[0].update(n)
    states[1].add(f"{key}/{n}")
    states[2].put("n", n)
    old = model.get(key, (None, [], {}))
    model[key] = (n, [*old[1], f"{key}/{n}"], {**old[2], "n": n})


def _read(backend: AbstractKeyedStateBackend) -> dict[str, Any]:
    out = {}
    count, seen, tags = backend.get_state(COUNT), backend.get_list_state(SEEN), backend.get_map_state(TAGS)
    for key in sorted(set(backend.get_keys("count")) | set(backend.get_keys("seen"))):
        backend.set_current_key(key)
        out[key] = (count.value(), list(seen.get()), dict(tags.items()))
    return out


def _owned(backend: AbstractKeyedStateBackend) -> set[str]:
    rng = backend.key_group_range
    return {k for k in [*KEYS, "new"] if rng.start <= _group(k) <= rng.end}


@cache
def _group(key: str) -> int:
    from flinkstate.state import assign_to_key_group

    return assign_to_key_group(key, 128, Types.STRING())


def _first(location: Any, factory: Any) -> tuple[CompletedCheckpoint, list[AbstractKeyedStateBackend]]:
    """Checkpoint 1 (both subtasks of parallelism 2, every key set) and its backends."""
    backends = []
    url, options = location
    storage = CheckpointStorage(url, options, incremental=True, rocksdb_format="parquet")
    pending = storage.begin()
    from flinkstate.state import compute_key_group_range_for_operator_index

    for i in range(2):
        rng = compute_key_group_range_for_operator_index(128, 2, i)
        b = factory(key_type=Types.STRING(), max_parallelism=128, key_group_range=rng)
        backends.append(b)
        for n, key in enumerate(KEYS):
            _apply(b, {}, key, n)
        pending.write_keyed("op", b, i, 2).result()
    return pending.commit(), backends


def test_a_restored_subtask_writes_an_increment(location: Any, make_backend: Any) -> None:
    factory = make_backend
    url, options = location
    first, others = _first(location, factory)
    storage = CheckpointStorage(url, options, incremental=True, rocksdb_format="parquet")
    restored = first.keyed_backend("op", 1, 2, factory, key_type=Types.STRING())
    model = _read(restored)
    pending = storage.begin()
    assert pending.target.continue_from(restored, first, "op", 1, 2)
    changed = ["k1", "k2", "k3", "ü", "new"]
    for n, key in enumerate(changed):
        _apply(restored, model, key, 10_000 + n)
    _apply(restored, model, "k4", None)  # removed
    _apply(restored, model, "k5", None)
    pending.write_keyed("op", restored, 1, 2).result()
    pending.write_keyed("op", others[0], 0, 2).result()
    second = pending.commit()
    assert second.manifest.incremental
    entry = second.manifest.operator("op").subtasks[1]
    own = [f for fs in entry.keyed.values() for f in fs if f.checkpoint_id == second.checkpoint_id]
    touched = len(set([*changed, "k4", "k5"]) & _owned(restored))
    assert 0 < sum(f.rows for f in own) <= 2 * 3 * touched  # per state and key: a delete, an upsert
    again = second.keyed_backend("op", 1, 2, factory, key_type=Types.STRING())
    assert _read(again) == model


def test_only_a_restore_of_its_own_subtask_continues(location: Any, make_backend: Any, tmp_path: Any) -> None:
    factory = make_backend
    url, options = location
    first, _ = _first(location, factory)
    incremental = CheckpointStorage(url, options, incremental=True, rocksdb_format="parquet")
    rescaled = first.keyed_backend("op", 0, 3, factory, key_type=Types.STRING())
    same = first.keyed_backend("op", 0, 2, factory, key_type=Types.STRING())
    target = incremental.begin().target
    assert not target.continue_from(rescaled, first, "op", 0, 3)  # another parallelism
    assert not target.continue_from(same, first, "other", 0, 2)  # another operator
    full = CheckpointStorage(url, options, incremental=False).begin().target
    assert not full.continue_from(same, first, "op", 0, 2)
    elsewhere = CheckpointStorage(tempfile.mkdtemp(dir=tmp_path), incremental=True).begin().target
    assert not elsewhere.continue_from(same, first, "op", 0, 2)  # another root (a seed)
    assert target.continue_from(same, first, "op", 0, 2)
