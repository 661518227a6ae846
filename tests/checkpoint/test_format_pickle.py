"""Pickled values: flagged in the manifest, never unpickled unless the reader allows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointError, CheckpointStorage, CompletedCheckpoint, open_checkpoint
from flinkstate.state import (
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.operator import OperatorStateBackend

from state_functions import Collect

PICKLED = Types.PICKLED_BYTE_ARRAY()
UNPICKLED: list[str] = []


def _rebuild(label: str) -> Tripwire:
    UNPICKLED.append(label)
    return Tripwire(label)


class Tripwire:
    """Records every time it is rebuilt from a pickle (a pickle runs code when loaded)."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_rebuild, (self.label,))


KEYED = {
    "value": ValueStateDescriptor("value", PICKLED),
    "row": ValueStateDescriptor("row", Types.ROW_NAMED(["n", "obj"], [Types.LONG(), PICKLED])),
    "list": ListStateDescriptor("list", PICKLED),
    "map_key": MapStateDescriptor("map_key", PICKLED, Types.LONG()),
    "map_value": MapStateDescriptor("map_value", Types.STRING(), Types.LIST(PICKLED)),
    "aggregating": AggregatingStateDescriptor("aggregating", Collect(), Types.LIST(PICKLED)),
    "plain": ValueStateDescriptor("plain", Types.LONG()),
}
SPLIT = ListStateDescriptor("split", PICKLED)
BROADCAST = MapStateDescriptor("broadcast", Types.STRING(), PICKLED)
PLAIN_SPLIT = ListStateDescriptor("plain_split", Types.STRING())


def write(root: Path | str, tripwires: bool = False, options: dict[str, Any] | None = None) -> None:
    backend = HeapKeyedStateBackend(key_type=Types.STRING())
    for i in range(10):
        obj: Any = Tripwire(f"k{i}") if tripwires else {"i": i, "set": frozenset({i})}
        backend.set_current_key(f"k{i}")
        backend.get_state(KEYED["value"]).update(obj)
        backend.get_state(KEYED["row"]).update((i, obj))
        backend.get_list_state(KEYED["list"]).add_all([obj, [i, None]])
        backend.get_map_state(KEYED["map_key"]).put(frozenset({i, -i}), i)
        backend.get_map_state(KEYED["map_value"]).put("x", [obj, None])
        backend.get_aggregating_state(KEYED["aggregating"]).add(obj)
        backend.get_state(KEYED["plain"]).update(i)
    ops = OperatorStateBackend()
    ops.get_list_state(SPLIT).add_all([complex(1, 2), {"a": (1, 2)}])
    ops.get_broadcast_state(BROADCAST).put("rule", Tripwire("op") if tripwires else {"r": 1})
    ops.get_list_state(PLAIN_SPLIT).add("plain")
    pending = CheckpointStorage(str(root), options).begin()
    pending.write_keyed("op", backend)
    pending.write_operator("op", ops)
    pending.commit()


def test_pickled_states_are_flagged_in_the_manifest(tmp_path: Path) -> None:
    write(tmp_path / "root")
    doc = json.loads((tmp_path / "root" / "chk-1" / "_metadata").read_text())
    keyed = {s["name"]: s["pickled"] for s in doc["operators"][0]["keyed_states"]}
    assert keyed == {name: name != "plain" for name in KEYED}
    ops = {s["name"]: s["pickled"] for s in doc["operators"][0]["operator_states"]}
    assert ops == {"split": True, "broadcast": True, "plain_split": False}


@pytest.mark.parametrize("restore", ["keyed", "operator"])
def test_pickled_values_are_refused_without_permission(
    location: tuple[str, dict[str, Any]], restore: str
) -> None:
    root, options = location
    write(root, tripwires=True, options=options)
    UNPICKLED.clear()
    checkpoint = open_checkpoint(root, options)
    with pytest.raises(CheckpointError, match=r"^\[PICKLE_NOT_ALLOWED\]") as info:
        if restore == "keyed":
            checkpoint.keyed_backend("op", 0, 1)
        else:
            checkpoint.operator_backend("op", 0, 1)
    assert info.value.code == "PICKLE_NOT_ALLOWED"
    assert UNPICKLED == []  # no pickle was loaded, so no code ran
    # the refusal is per reader: the same files load once pickles are allowed
    allowed = open_checkpoint(root, options, allow_pickle=True)
    if restore == "keyed":
        backend = allowed.keyed_backend("op", 0, 1)
        backend.set_current_key("k4")
        assert backend.get_state(KEYED["value"]).value().label == "k4"
        assert sorted(set(UNPICKLED)) == [f"k{i}" for i in range(10)]
    else:
        rule = allowed.operator_backend("op", 0, 1).get_broadcast_state(BROADCAST).get("rule")
        assert isinstance(rule, Tripwire) and set(UNPICKLED) == {"op"}


def check_restored(checkpoint: CompletedCheckpoint) -> None:
    backend = checkpoint.keyed_backend("op", 0, 1)
    backend.set_current_key("k3")
    obj = {"i": 3, "set": frozenset({3})}
    assert backend.get_state(KEYED["value"]).value() == obj
    assert backend.get_state(KEYED["row"]).value() == (3, obj)
    assert list(backend.get_list_state(KEYED["list"]).get()) == [obj, [3, None]]
    assert dict(backend.get_map_state(KEYED["map_key"]).items()) == {frozenset({3, -3}): 3}
    assert backend.get_map_state(KEYED["map_value"]).get("x") == [obj, None]
    assert backend.get_aggregating_state(KEYED["aggregating"]).get() == [obj]
    ops = checkpoint.operator_backend("op", 0, 1)
    assert list(ops.get_list_state(SPLIT).get()) == [complex(1, 2), {"a": (1, 2)}]
    assert dict(ops.get_broadcast_state(BROADCAST).items()) == {"rule": {"r": 1}}


def test_pickled_values_load_when_allowed(location: tuple[str, dict[str, Any]]) -> None:
    root, options = location
    write(root, options=options)
    check_restored(open_checkpoint(root, options, allow_pickle=True))
    check_restored(CheckpointStorage(root, options).load(allow_pickle=True))
    check_restored(open_checkpoint(f"{root}/chk-1", options, allow_pickle=True))


def test_states_without_pickles_need_no_permission(location: tuple[str, dict[str, Any]]) -> None:
    root, options = location
    write(root, options=options)
    checkpoint = open_checkpoint(root, options)
    tables = dict(checkpoint.read_keyed("op", "plain"))  # raw Arrow tables: no values decoded
    assert sum(t.num_rows for ts in tables.values() for t in ts) == 10
    pending = CheckpointStorage(f"{root}-other", options).begin()
    backend = HeapKeyedStateBackend(key_type=Types.STRING())
    backend.set_current_key("k")
    backend.get_state(KEYED["plain"]).update(1)
    pending.write_keyed("op", backend)
    pending.commit()
    restored = open_checkpoint(f"{root}-other", options).keyed_backend("op", 0, 1)
    restored.set_current_key("k")
    assert restored.get_state(KEYED["plain"]).value() == 1
