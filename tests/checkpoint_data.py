"""State the checkpoint tests write and compare: builders and content dumps."""

from __future__ import annotations

from typing import Any

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.state import (
    HeapKeyedStateBackend,
    KeyGroupRange,
    ListStateDescriptor,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.operator import OperatorStateBackend

VALUE = ValueStateDescriptor("value", Types.LONG())
LIST = ListStateDescriptor("list", Types.STRING())
MAP = MapStateDescriptor("map", Types.STRING(), Types.LONG())
OFFSETS = ListStateDescriptor("offsets", Types.LONG())
SOURCES = ListStateDescriptor("sources", Types.STRING())
RULES = MapStateDescriptor("rules", Types.STRING(), Types.STRING())

Contents = dict[tuple[str, Any, Any], Any]


def fill(backend: HeapKeyedStateBackend, keys: range, version: int = 0) -> HeapKeyedStateBackend:
    """Value, list and map state (some namespaced) for the keys the backend owns."""
    rng = backend.key_group_range
    for k in keys:
        if assign_to_key_group(k, backend.max_parallelism) not in rng:
            continue
        backend.set_current_key(k)
        backend.get_state(VALUE).update(k * 10 + version)
        backend.get_list_state(LIST).add_all([f"{k}-a", f"{k}-b"])
        backend.get_map_state(MAP).put_all({"x": k, "v": version})
        if k % 5 == 0:
            backend.get_partitioned_state(k % 3, VALUE).update(-k)
    return backend


def contents(backend: HeapKeyedStateBackend) -> Contents:
    """(state, key, namespace) -> value for everything the backend holds."""
    out: Contents = {}
    with backend.snapshot() as snap:
        for name, state in snap.states.items():
            for kg in snap.key_group_range:
                for e in state.entries(kg):
                    value = tuple(e.value) if isinstance(e.value, list) else e.value
                    value = tuple(sorted(value.items())) if isinstance(value, dict) else value
                    out[(name, e.key, e.namespace)] = value
    return out


def dump(backend: HeapKeyedStateBackend, timestamps: bool = True) -> Contents:
    """(state, key, namespace) -> (value, TTL timestamp), or the value alone, as stored."""
    out: Contents = {}
    with backend.snapshot() as snap:
        for name, state in snap.states.items():
            for kg in snap.key_group_range:
                for e in state.entries(kg):
                    out[(name, e.key, e.namespace)] = (e.value, e.timestamp) if timestamps else e.value
    return out


def written(keys: range, max_parallelism: int = 128, version: int = 0) -> Contents:
    """What :func:`fill` writes for every key (one backend owning all key groups)."""
    full = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=max_parallelism)
    return contents(fill(full, keys, version))


def subtask_backend(max_parallelism: int, rng: KeyGroupRange) -> HeapKeyedStateBackend:
    return HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=max_parallelism, key_group_range=rng)


def operator_backend(subtask: int) -> OperatorStateBackend:
    ops = OperatorStateBackend()
    ops.get_list_state(OFFSETS).add_all([subtask * 100 + i for i in range(subtask + 2)])
    ops.get_union_list_state(SOURCES).add(f"source-{subtask}")
    ops.get_broadcast_state(RULES).put_all({"a": "1", "b": "2"})
    return ops


def write_values(
    path: str,
    key_type: Any,
    values: dict[Any, Any],
    parallelism: int,
    state: str = "count",
    offsets: bool = False,
) -> str:
    """A checkpoint at ``path`` of operator ``op`` at ``parallelism`` (max parallelism 128):
    ValueState ``state`` (LONG) holding ``values`` (key -> value) in the subtasks owning them,
    and with ``offsets`` a list state ``offsets`` of ``[i, i + 10]`` in subtask ``i``."""
    pending = CheckpointStorage(path).begin()
    desc = ValueStateDescriptor(state, Types.LONG())
    for i in range(parallelism):
        rng = compute_key_group_range_for_operator_index(128, parallelism, i)
        backend = HeapKeyedStateBackend(key_type=key_type, key_group_range=rng)
        value = backend.get_state(desc)
        for key, v in values.items():
            if assign_to_key_group(key, 128, key_type) in rng:
                backend.set_current_key(key)
                value.update(v)
        pending.write_keyed("op", backend, i, parallelism)
        if offsets:
            ops = OperatorStateBackend()
            ops.get_list_state(ListStateDescriptor("offsets", Types.LONG())).add_all([i, i + 10])
            pending.write_operator("op", ops, i, parallelism)
    pending.commit()
    return path
