"""Asynchronous snapshots: ``write_keyed`` freezes the state when it returns and writes it
in the background; whatever happens to the backend afterwards is not in the checkpoint."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import dump

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.checkpoint.writing import writer as writer_module
from flinkstate.state import (
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.keyed.snapshot import KeyedStateSnapshot
from flinkstate.state.operator import OperatorStateBackend

from state_functions import Average, Sum

VALUE = ValueStateDescriptor("value", Types.ROW_NAMED(["n", "s"], [Types.LONG(), Types.STRING()]))
LIST = ListStateDescriptor("list", Types.STRING())
MAP = MapStateDescriptor("map", Types.STRING(), Types.LIST(Types.LONG()))
SUM = ReducingStateDescriptor("sum", Sum(), Types.LONG())
AVG = AggregatingStateDescriptor("avg", Average(), Types.LIST(Types.LONG()))
LATE = ValueStateDescriptor("late", Types.LONG())


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Holds every background keyed write until the event is set."""
    event = threading.Event()
    original = writer_module.SubtaskWriter.keyed

    def held(self: Any, snapshot: KeyedStateSnapshot, *args: Any) -> Any:
        assert event.wait(30), "the test never opened the gate"
        return original(self, snapshot, *args)

    monkeypatch.setattr(writer_module.SubtaskWriter, "keyed", held)
    yield event
    event.set()


def fill(backend: HeapKeyedStateBackend, keys: range) -> None:
    for k in keys:
        backend.set_current_key(f"k{k}")
        backend.get_state(VALUE).update((k, f"v{k}"))
        backend.get_list_state(LIST).add_all([f"a{k}", f"b{k}"])
        backend.get_map_state(MAP).put_all({"x": [k], "y": [k, k]})
        backend.get_reducing_state(SUM).add(k)
        backend.get_aggregating_state(AVG).add(k)
        if k % 4 == 0:
            backend.get_partitioned_state(("w", k % 3), VALUE).update((-k, None))


def mutate(backend: HeapKeyedStateBackend, keys: range) -> None:
    """Every kind of write: updates, appends, removals, clears, new keys, a new state."""
    for k in keys:
        backend.set_current_key(f"k{k}")
        if k % 3 == 0:
            backend.get_state(VALUE).clear()
            backend.get_list_state(LIST).clear()
            backend.get_map_state(MAP).clear()
        else:
            backend.get_state(VALUE).update((k + 1, "changed"))
            backend.get_list_state(LIST).add("late")
            backend.get_list_state(LIST).update(["replaced", *backend.get_list_state(LIST).get()])
            backend.get_map_state(MAP).remove("x")
            backend.get_map_state(MAP).put("y", [-1])
            backend.get_map_state(MAP).put("z", [])
        backend.get_reducing_state(SUM).add(1000)
        backend.get_aggregating_state(AVG).add(1000)
        backend.get_partitioned_state(("w", 0), VALUE).update((0, "new namespace entry"))
        backend.get_state(LATE).update(k)
    for k in range(10_000, 13_000):  # new keys: the copy-on-write maps grow and rehash
        backend.set_current_key(f"k{k}")
        backend.get_list_state(LIST).add("new key")


@pytest.mark.parametrize("async_snapshots", [True, False], ids=["cow", "nested"])
def test_writes_after_write_keyed_are_not_in_the_checkpoint(
    tmp_path: Path, gate: threading.Event, async_snapshots: bool
) -> None:
    keys = range(600)
    backend = HeapKeyedStateBackend(key_type=Types.STRING(), async_snapshots=async_snapshots)
    fill(backend, keys)
    frozen = dump(backend)
    ops = OperatorStateBackend()
    offsets = ops.get_list_state(ListStateDescriptor("offsets", Types.LONG()))
    offsets.add_all([1, 2, 3])

    pending = CheckpointStorage(str(tmp_path / "root")).begin()
    future = pending.write_keyed("op", backend)
    pending.write_operator("op", ops)
    assert not future.done()  # the keyed write waits in the background
    mutate(backend, keys)
    offsets.add(4)
    changed = dump(backend)
    assert changed != frozen and ("late", "k1", None) in changed
    gate.set()
    completed = pending.commit()

    restored = open_checkpoint(completed.directory.url).keyed_backend("op", 0, 1)
    assert dump(restored) == frozen
    assert "late" not in restored.state_names()
    restored.set_current_key("k3")
    assert restored.get_state(VALUE).value() == (3, "v3")
    assert list(restored.get_list_state(LIST).get()) == ["a3", "b3"]
    assert restored.get_reducing_state(SUM).get() == 3
    assert list(open_checkpoint(str(tmp_path / "root")).operator_backend("op", 0, 1).get_list_state(
        ListStateDescriptor("offsets", Types.LONG())
    ).get()) == [1, 2, 3]  # fmt: skip
    assert dump(backend) == changed  # the live backend kept its writes


@pytest.mark.parametrize("async_snapshots", [True, False], ids=["cow", "nested"])
def test_two_pending_checkpoints_each_hold_their_own_moment(
    tmp_path: Path, gate: threading.Event, async_snapshots: bool
) -> None:
    backend = HeapKeyedStateBackend(key_type=Types.STRING(), async_snapshots=async_snapshots)
    fill(backend, range(200))
    first_state = dump(backend)
    first = CheckpointStorage(str(tmp_path / "a")).begin()
    first.write_keyed("op", backend)
    mutate(backend, range(200))
    second_state = dump(backend)
    second = CheckpointStorage(str(tmp_path / "b")).begin()
    second.write_keyed("op", backend)
    backend.set_current_key("k7")
    backend.get_state(VALUE).update((7, "after both"))
    gate.set()
    a = first.commit().keyed_backend("op", 0, 1)
    b = second.commit().keyed_backend("op", 0, 1)
    assert dump(a) == first_state
    assert dump(b) == second_state
