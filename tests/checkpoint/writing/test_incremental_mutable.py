"""Values changed in place: an increment restores what a full checkpoint of the same moment does.

A heap backend hands out the objects it stores (as Flink's does), so a caller may change a
list value, a list element, a map value or an accumulator in place without writing it
back. Random reads followed by such mutations, writes, removals, clears, held snapshots and
checkpoints (incremental, and now and then in full to the same storage) run on both heap
maps; every moment is checkpointed to two storages, one incremental and one always full,
and both restores must equal the live backend.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import dump

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.state import (
    AggregateFunction,
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReduceFunction,
    ReducingStateDescriptor,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.ttl.time import ManualTimeProvider

LONGS = Types.LIST(Types.LONG())


class Concat(ReduceFunction):
    def reduce(self, value1: list[int], value2: list[int]) -> list[int]:
        return value1 + value2


class Gather(AggregateFunction[int, list[int], list[int]]):
    """Its result is the accumulator itself: a caller may change it in place."""

    def create_accumulator(self) -> list[int]:
        return []

    def add(self, value: int, accumulator: list[int]) -> list[int]:
        accumulator.append(value)
        return accumulator

    def get_result(self, accumulator: list[int]) -> list[int]:
        return accumulator

    def merge(self, acc_a: list[int], acc_b: list[int]) -> list[int]:
        return acc_a + acc_b


def descriptors() -> dict[str, Any]:
    ttl = ValueStateDescriptor("ttl", LONGS)
    ttl_map = MapStateDescriptor("ttl_map", Types.STRING(), LONGS)
    ttl_list = ListStateDescriptor("ttl_list", LONGS)
    for desc in (ttl, ttl_map, ttl_list):  # read through get_internal and get: nothing expires
        desc.enable_time_to_live(StateTtlConfig.new_builder(timedelta(hours=1)).build())
    return {
        "ttl_map": ttl_map,
        "ttl_list": ttl_list,
        "value": ValueStateDescriptor("value", LONGS),
        "map": MapStateDescriptor("map", Types.STRING(), LONGS),
        "list": ListStateDescriptor("list", LONGS),
        "reduce": ReducingStateDescriptor("reduce", Concat(), LONGS),
        "agg": AggregatingStateDescriptor("agg", Gather(), LONGS),
        "ttl": ttl,
        "long": ValueStateDescriptor("long", Types.LONG()),
    }


def _state(backend: HeapKeyedStateBackend, desc: Any) -> Any:
    if isinstance(desc, MapStateDescriptor):
        return backend.get_map_state(desc)
    if isinstance(desc, ListStateDescriptor):
        return backend.get_list_state(desc)
    if isinstance(desc, ReducingStateDescriptor):
        return backend.get_reducing_state(desc)
    if isinstance(desc, AggregatingStateDescriptor):
        return backend.get_aggregating_state(desc)
    return backend.get_state(desc)


def _mutate_what_is_read(r: random.Random, name: str, state: Any) -> None:
    """Read through one of the state's read paths and change what it returned, in place."""
    x = r.randrange(100)
    if name.endswith("map"):
        how = r.randrange(3)
        if how == 0:
            got = state.get(r.choice("ab"))
            found = [] if got is None else [got]
        else:
            found = [v for _, v in state.items()] if how == 1 else list(state.values())
    elif name.endswith("list"):
        found = [element for element in state.get()]
    else:
        got = state.value() if name in ("value", "ttl", "long") else state.get()
        found = [] if got is None or name == "long" else [got]
    for obj in found:
        obj.append(x) if r.random() < 0.7 else obj.__setitem__(0, x)


def _write(r: random.Random, name: str, state: Any) -> None:
    op, x = r.randrange(3), r.randrange(100)
    if op == 0:
        state.clear()
    elif name.endswith("map"):
        state.put(r.choice("ab"), [x]) if op == 1 else state.remove(r.choice("ab"))
    elif name.endswith("list"):
        state.add([x]) if op == 1 else state.update([[x], [x + 1]])
    elif name in ("reduce", "agg"):
        state.add([x] if name == "reduce" else x)
    else:
        state.update([x] if name != "long" else x)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("async_snapshots", [True, False], ids=["cow", "nested"])
def test_increments_keep_changes_made_in_place(tmp_path: Path, seed: int, async_snapshots: bool) -> None:
    r = random.Random(seed)
    clock = ManualTimeProvider(1_000)
    backend = HeapKeyedStateBackend(
        key_type=Types.LONG(), max_parallelism=8, time_provider=clock, async_snapshots=async_snapshots
    )
    descs = descriptors()
    incr = CheckpointStorage(str(tmp_path / "incr"), incremental=True)
    full = CheckpointStorage(str(tmp_path / "full"))
    held: list[Any] = []
    increments = 0
    for step in range(900):
        backend.set_current_key(r.randrange(12))
        name = r.choice(sorted(descs))
        state = _state(backend, descs[name])
        roll = r.random()
        if roll < 0.45:
            _mutate_what_is_read(r, name, state)
        elif roll < 0.9:
            _write(r, name, state)
        elif roll < 0.93:  # a snapshot held across later reads and writes (copy-on-write)
            if held:
                held.pop().release()
            else:
                held.append(backend.snapshot())
        else:
            pending = incr.begin(incremental=r.random() > 0.15)
            pending.write_keyed("op", backend)
            done = pending.commit()
            increments += done.manifest.incremental
            pending_full = full.begin(done.checkpoint_id)
            pending_full.write_keyed("op", backend)
            expected = dump(pending_full.commit().keyed_backend("op", 0, 1, time_provider=clock))
            assert expected == dump(backend), step
            assert dump(done.keyed_backend("op", 0, 1, time_provider=clock)) == expected, step
    assert increments > 5
    for snap in held:
        snap.release()
    backend.close()


def test_rocksdb_keeps_no_change_made_in_place(tmp_path: Path) -> None:
    """RocksDB hands out deserialized copies (Flink's semantics): a change in place is not
    stored, and no checkpoint sees it."""
    from flinkstate.state import RocksDBKeyedStateBackend

    with RocksDBKeyedStateBackend(str(tmp_path / "db"), key_type=Types.LONG()) as backend:
        descs = descriptors()
        backend.set_current_key(3)
        value, mapped = backend.get_state(descs["value"]), backend.get_map_state(descs["map"])
        value.update([3])
        mapped.put("a", [3])
        value.value().append(99)
        mapped.get("a").append(99)
        assert (value.value(), mapped.get("a")) == ([3], [3])
        pending = CheckpointStorage(str(tmp_path / "chk")).begin()
        pending.write_keyed("op", backend)
        restored = pending.commit().keyed_backend("op", 0, 1)
        restored.set_current_key(3)
        assert restored.get_state(descs["value"]).value() == [3]
        assert restored.get_map_state(descs["map"]).get("a") == [3]
        restored.close()
