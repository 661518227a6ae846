"""The keyed-backend contract: state kinds, namespaces, null rules, keys. Runs on every keyed
backend (``make_backend``: each of ``support.backends.KEYED_BACKENDS``, the heap backend with its
copy-on-write map and with nested maps, and RocksDB). The same fixture runs the contracts that
sit with the code they test on every backend too: change recording
(``state/keyed/test_changes.py``), TTL (``state/ttl/test_ttl.py``), keys
(``state/keyed/test_keyed_keys.py``, ``state/types/test_same_key.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from flinkstate.state import (
    AggregatingStateDescriptor,
    FlinkStateError,
    KeyGroupRange,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)

from state_functions import Average, Sum

VALUE = ValueStateDescriptor("value", Types.LONG())
LIST = ListStateDescriptor("list", Types.STRING())
MAP = MapStateDescriptor("map", Types.STRING(), Types.LONG())


REDUCING = ReducingStateDescriptor("reducing", Sum(), Types.LONG())
AGGREGATING = AggregatingStateDescriptor("avg", Average(), Types.LIST(Types.LONG()))


def test_value_state(make_backend: Any) -> None:
    b = make_backend()
    state = b.get_state(VALUE)
    b.set_current_key("a")
    assert state.value() is None
    state.update(1)
    b.set_current_key("b")
    assert state.value() is None
    state.update(2)
    b.set_current_key("a")
    assert state.value() == 1
    state.update(None)  # update(None) clears, as in Flink
    assert state.value() is None
    assert list(b.get_keys("value")) == ["b"]
    b.set_current_key("b")
    state.clear()
    assert list(b.get_keys("value")) == []


def test_list_state_rules(make_backend: Any) -> None:
    b = make_backend()
    state = b.get_list_state(LIST)
    b.set_current_key(7)
    assert list(state.get()) == []
    state.add("x")
    state.add_all(["y", "z"])
    assert list(state.get()) == ["x", "y", "z"]
    for bad in (
        lambda: state.add(None),
        lambda: state.add_all(["ok", None]),
        lambda: state.update(None),
        lambda: state.add_all(None),
    ):
        with pytest.raises(FlinkStateError, match="NULL_ELEMENT"):
            bad()
    assert list(state.get()) == ["x", "y", "z"]  # a refused call changes nothing
    state.add_all([])
    state.update(["q"])
    assert list(state.get()) == ["q"]
    state.update([])  # an empty list clears
    assert list(state.get()) == []
    assert list(b.get_keys("list")) == []


def test_list_get_returns_a_copy(make_backend: Any) -> None:
    b = make_backend()
    state = b.get_list_state(LIST)
    b.set_current_key(1)
    state.add("a")
    got = state.get()
    got.append("mutated")
    assert list(state.get()) == ["a"]


def test_map_state(make_backend: Any) -> None:
    b = make_backend()
    state = b.get_map_state(MAP)
    b.set_current_key(1)
    assert state.is_empty() and state.get("a") is None and not state.contains("a")
    state.put("a", 1)
    state.put_all({"b": 2, "c": None})
    state["d"] = 4
    assert state.get("b") == 2 and state["d"] == 4
    assert state.contains("c") and state.get("c") is None  # a None value is a value
    assert sorted(state.keys()) == ["a", "b", "c", "d"]
    assert sorted(state.items(), key=lambda kv: kv[0]) == [
        ("a", 1),
        ("b", 2),
        ("c", None),
        ("d", 4),
    ]
    assert "a" in state and sorted(state) == ["a", "b", "c", "d"]
    for key in list(state.keys()):
        state.remove(key)  # removing while iterating a returned list is safe
    assert state.is_empty()
    assert list(b.get_keys("map")) == []  # an emptied map is gone
    with pytest.raises(FlinkStateError, match="NULL_KEY"):
        state.put(None, 1)
    state.put_all(None)
    state.put("x", 9)
    del state["x"]
    assert state.is_empty()


def test_reducing_state(make_backend: Any) -> None:
    b = make_backend()
    state = b.get_reducing_state(REDUCING)
    b.set_current_key(1)
    assert state.get() is None
    for v in (1, 2, 3):
        state.add(v)
    assert state.get() == 6
    state.add(None)  # Flink: adding null clears
    assert state.get() is None
    lam = b.get_reducing_state(ReducingStateDescriptor("max", max, Types.LONG()))
    lam.add(3)
    lam.add(1)
    assert lam.get() == 3


def test_aggregating_state(make_backend: Any) -> None:
    b = make_backend()
    state = b.get_aggregating_state(AGGREGATING)
    b.set_current_key(1)
    assert state.get() is None
    state.add(2)
    state.add(4)
    assert state.get() == 3.0
    b.set_current_key(2)
    state.add(10)
    assert state.get() == 10.0
    state.add(None)
    assert state.get() is None


def test_namespaces_are_isolated(make_backend: Any) -> None:
    b = make_backend()
    b.set_current_key("k")
    void = b.get_state(VALUE)
    void.update(1)
    w1 = b.get_partitioned_state(10, VALUE)
    assert w1.value() is None
    w1.update(2)
    w2 = b.get_partitioned_state(20, VALUE)
    w2.update(3)
    assert b.get_partitioned_state(10, VALUE).value() == 2
    assert b.get_partitioned_state(None, VALUE).value() == 1
    assert list(b.get_keys("value", 20)) == ["k"]
    assert list(b.get_keys("value")) == ["k"]
    b.get_partitioned_state(10, VALUE).clear()
    assert list(b.get_keys("value", 10)) == []
    with pytest.raises(FlinkStateError, match="NAMESPACE_TYPE_MISMATCH"):
        b.get_partitioned_state("w", VALUE)


def test_tuple_keys_and_namespaces_do_not_collide(make_backend: Any) -> None:
    b = make_backend()
    state = b.get_state(VALUE)
    b.set_current_key((1, 2))
    state.update(12)
    b.set_current_key((1, 3))
    b.get_partitioned_state((2,), VALUE).update(99)
    b.set_current_key((1, 2))
    assert b.get_state(VALUE).value() == 12
    assert sorted(b.get_keys("value")) == [(1, 2)]
    assert list(b.get_keys("value", (2,))) == [(1, 3)]


def test_merge_namespaces(make_backend: Any) -> None:
    b = make_backend()
    b.set_current_key("k")
    lst = b.get_partitioned_state(1, LIST)
    lst.add("a")
    b.get_partitioned_state(2, LIST).add("b")
    b.get_partitioned_state(3, LIST).add("c")
    lst = b.get_partitioned_state(3, LIST)
    lst.merge_namespaces(3, [1, 2])
    assert sorted(lst.get()) == ["a", "b", "c"]
    assert list(b.get_keys("list", 1)) == [] and list(b.get_keys("list", 2)) == []
    red = b.get_partitioned_state(1, REDUCING)
    red.add(5)
    b.get_partitioned_state(2, REDUCING).add(6)
    red.merge_namespaces(9, [1, 2])
    assert b.get_partitioned_state(9, REDUCING).get() == 11
    agg = b.get_partitioned_state(1, AGGREGATING)
    agg.add(1)
    b.get_partitioned_state(2, AGGREGATING).add(3)
    agg.merge_namespaces(2, [1])
    assert b.get_partitioned_state(2, AGGREGATING).get() == 2.0


def test_get_keys_across_key_groups(make_backend: Any) -> None:
    b = make_backend(max_parallelism=16)
    state = b.get_state(VALUE)
    for k in range(500):
        b.set_current_key(k)
        state.update(k)
    assert sorted(b.get_keys("value")) == list(range(500))
    assert list(b.get_keys("unknown")) == []


def test_apply_to_all_keys(make_backend: Any) -> None:
    b = make_backend()
    state = b.get_state(VALUE)
    for k in range(100):
        b.set_current_key(k)
        state.update(k)
    b.set_current_key(4)
    seen: list[int] = []

    def clear_odd(key: int, st: Any) -> None:
        seen.append(key)
        assert st.value() == key
        if key % 2:
            st.clear()
        else:
            st.update(key * 10)

    b.apply_to_all_keys(None, VALUE, clear_odd)
    assert sorted(seen) == list(range(100))
    assert sorted(b.get_keys("value")) == list(range(0, 100, 2))
    assert b.get_current_key() == 4 and state.value() == 40


def test_state_objects_are_cached(make_backend: Any) -> None:
    b = make_backend()
    assert b.get_state(VALUE) is b.get_state(VALUE)
    assert b.get_state(VALUE) is b.get_partitioned_state(3, VALUE)
    assert b.get_list_state(LIST) is b.get_list_state(ListStateDescriptor("list", Types.STRING()))


def test_registration_conflicts(make_backend: Any) -> None:
    b = make_backend()
    b.get_state(VALUE)
    with pytest.raises(FlinkStateError, match="STATE_KIND_CONFLICT") as err:
        b.get_list_state(ListStateDescriptor("value", Types.LONG()))
    assert "'value'" in str(err.value)
    with pytest.raises(FlinkStateError, match="STATE_MIGRATION"):
        b.get_state(ValueStateDescriptor("value", Types.STRING()))
    with pytest.raises(FlinkStateError, match="WRONG_DESCRIPTOR"):
        b.get_state(LIST)


def test_key_rules(make_backend: Any) -> None:
    b = make_backend()
    state = b.get_state(VALUE)
    with pytest.raises(FlinkStateError, match="NO_CURRENT_KEY"):
        state.value()
    assert b.get_current_key() is None
    b.set_current_key(1)
    assert b.key_type == Types.LONG()  # inferred from the first key
    with pytest.raises(FlinkStateError, match="KEY_TYPE_MISMATCH"):
        b.set_current_key("one")
    with pytest.raises(FlinkStateError, match="KEY_TYPE_MISMATCH"):
        b.set_current_key(True)
    with pytest.raises(FlinkStateError, match="INVALID_KEY"):
        b.set_current_key(None)
    with pytest.raises(FlinkStateError, match="INVALID_KEY"):
        b.set_current_key(1 << 64)
    assert b.get_current_key() == 1  # a refused key leaves the current one


def test_declared_key_type(make_backend: Any) -> None:
    b = make_backend(key_type=Types.INT(), max_parallelism=64)
    b.set_current_key(2**31 - 1)
    assert b.get_current_key_group() == assign_to_key_group(2**31 - 1, 64, Types.INT())
    with pytest.raises(FlinkStateError, match="INVALID_KEY"):
        b.set_current_key(2**31)


def test_key_group_range(make_backend: Any) -> None:
    rng = KeyGroupRange(10, 19)
    b = make_backend(max_parallelism=64, key_group_range=rng)
    state = b.get_state(VALUE)
    inside = [k for k in range(1000) if assign_to_key_group(k, 64) in rng]
    outside = next(k for k in range(1000) if assign_to_key_group(k, 64) not in rng)
    for k in inside:
        b.set_current_key(k)
        state.update(k)
    with pytest.raises(FlinkStateError, match="KEY_GROUP_OUT_OF_RANGE"):
        b.set_current_key(outside)
    assert sorted(b.get_keys("value")) == inside
    with pytest.raises(FlinkStateError, match="INVALID_KEY_GROUP_RANGE"):
        make_backend(max_parallelism=8, key_group_range=KeyGroupRange(4, 8))
    with pytest.raises(FlinkStateError, match="INVALID_MAX_PARALLELISM"):
        make_backend(max_parallelism=0)


def test_closed_backend(make_backend: Any) -> None:
    b = make_backend()
    state = b.get_state(VALUE)
    b.set_current_key(1)
    state.update(1)
    b.close()
    with pytest.raises(FlinkStateError, match="BACKEND_CLOSED"):
        state.value()
    with pytest.raises(FlinkStateError, match="BACKEND_CLOSED"):
        b.set_current_key(2)
    with pytest.raises(FlinkStateError, match="BACKEND_CLOSED"):
        b.get_state(VALUE)


def _snapshot_contents(snap: Any) -> dict[str, set[Any]]:
    out: dict[str, set[Any]] = {}
    for name, state in snap.states.items():
        rows = set()
        for kg in snap.key_group_range:
            for e in state.entries(kg):
                value = e.value
                if isinstance(value, list):
                    value = tuple(value)
                elif isinstance(value, dict):
                    value = tuple(sorted(value.items()))
                rows.add((e.key, e.namespace, value))
        out[name] = rows
    return out


def test_snapshot_is_isolated_from_later_writes(make_backend: Any) -> None:
    b = make_backend(max_parallelism=4)
    value, lst, mp = b.get_state(VALUE), b.get_list_state(LIST), b.get_map_state(MAP)
    agg = b.get_aggregating_state(AGGREGATING)
    for k in range(300):
        b.set_current_key(k)
        value.update(k)
        lst.add(str(k))
        mp.put("a", k)
        agg.add(k)
    snap = b.snapshot()
    before = _snapshot_contents(snap)
    assert len(before["value"]) == 300
    for k in range(0, 300, 3):  # in-place mutations of lists, maps, accumulators
        b.set_current_key(k)
        value.update(-k)
        lst.add("more")
        mp.put("b", 1)
        agg.add(1000)
        if k % 2:
            value.clear()
    for k in range(300, 1000):  # growth (with rehashing) while the snapshot is held
        b.set_current_key(k)
        value.update(k)
    assert _snapshot_contents(snap) == before
    assert snap.key_type == Types.LONG() and snap.max_parallelism == 4
    assert snap.states["list"].meta.value_type == Types.STRING()
    snap.release()
    with pytest.raises(FlinkStateError, match="SNAPSHOT_RELEASED"):
        list(snap.states["value"].entries(0))
    after = _snapshot_contents(b.snapshot())
    assert len(after["value"]) == 1000 - len(range(0, 300, 3)) // 2
