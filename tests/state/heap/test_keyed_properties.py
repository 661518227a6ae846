"""Property tests: random operation sequences against a plain-dict model, with snapshots
taken at random moments (during rehash too) and compared with the model as of then."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.heap.cow_map import CopyOnWriteStateMap

VALUE = ValueStateDescriptor("v", Types.LONG())
LIST = ListStateDescriptor("l", Types.LONG())
MAP = MapStateDescriptor("m", Types.STRING(), Types.LONG())
KEYS = st.integers(0, 600)
NAMESPACES = st.sampled_from([None, None, 1, 2])

Model = dict[tuple[str, Any, Any], Any]


def backend_contents(snapshot: Any) -> Model:
    out: Model = {}
    for name, state in snapshot.states.items():
        for kg in snapshot.key_group_range:
            for e in state.entries(kg):
                out[(name, e.key, e.namespace)] = e.value
    return out


class KeyedStateMachine(RuleBasedStateMachine):
    async_snapshots = True

    @initialize()
    def setup(self) -> None:
        self.backend = HeapKeyedStateBackend(max_parallelism=2, async_snapshots=self.async_snapshots)
        self.model: Model = {}
        self.snapshots: list[tuple[Any, Model]] = []
        self.rehash_snapshots = 0

    def _scope(self, key: int, ns: Any, desc: Any) -> Any:
        self.backend.set_current_key(key)
        return self.backend.get_partitioned_state(ns, desc)

    @rule(key=KEYS, ns=NAMESPACES, value=st.integers(-5, 5) | st.none())
    def update_value(self, key: int, ns: Any, value: int | None) -> None:
        self._scope(key, ns, VALUE).update(value)
        if value is None:
            self.model.pop(("v", key, ns), None)
        else:
            self.model[("v", key, ns)] = value

    @rule(start=KEYS, count=st.integers(1, 400), value=st.integers(), as_list=st.booleans())
    def bulk_insert(self, start: int, count: int, value: int, as_list: bool) -> None:
        """Enough keys at once to make the maps rehash."""
        for key in range(start, start + count):
            self.backend.set_current_key(key)
            if as_list:
                self.backend.get_list_state(LIST).add(value)
                self.model.setdefault(("l", key, None), []).append(value)
            else:
                self.backend.get_state(VALUE).update(value)
                self.model[("v", key, None)] = value

    @rule(key=KEYS, ns=NAMESPACES, value=st.integers(0, 9))
    def list_add(self, key: int, ns: Any, value: int) -> None:
        self._scope(key, ns, LIST).add(value)
        self.model.setdefault(("l", key, ns), []).append(value)

    @rule(key=KEYS, ns=NAMESPACES, values=st.lists(st.integers(0, 9), max_size=3))
    def list_update(self, key: int, ns: Any, values: list[int]) -> None:
        self._scope(key, ns, LIST).update(values)
        if values:
            self.model[("l", key, ns)] = list(values)
        else:
            self.model.pop(("l", key, ns), None)

    @rule(key=KEYS, ns=NAMESPACES, user_key=st.sampled_from("abc"), value=st.integers(0, 9))
    def map_put(self, key: int, ns: Any, user_key: str, value: int) -> None:
        self._scope(key, ns, MAP).put(user_key, value)
        self.model.setdefault(("m", key, ns), {})[user_key] = value

    @rule(key=KEYS, ns=NAMESPACES, user_key=st.sampled_from("abc"))
    def map_remove(self, key: int, ns: Any, user_key: str) -> None:
        self._scope(key, ns, MAP).remove(user_key)
        current = self.model.get(("m", key, ns))
        if current is not None:
            current.pop(user_key, None)
            if not current:
                del self.model[("m", key, ns)]

    @rule(key=KEYS, ns=NAMESPACES, desc=st.sampled_from([VALUE, LIST, MAP]))
    def clear(self, key: int, ns: Any, desc: Any) -> None:
        self._scope(key, ns, desc).clear()
        self.model.pop((desc.name, key, ns), None)

    @rule(key=KEYS, ns=NAMESPACES)
    def read(self, key: int, ns: Any) -> None:
        assert self._scope(key, ns, VALUE).value() == self.model.get(("v", key, ns))
        assert list(self._scope(key, ns, LIST).get()) == self.model.get(("l", key, ns), [])
        expected = self.model.get(("m", key, ns), {})
        assert dict(self._scope(key, ns, MAP).items()) == expected

    @rule()
    def take_snapshot(self) -> None:
        if self.async_snapshots:
            tables = [self.backend.table(n) for n in self.backend.state_names()]
            if any(m.is_rehashing for t in tables for m in t.maps):  # type: ignore[attr-defined]
                self.rehash_snapshots += 1
        self.snapshots.append((self.backend.snapshot(), copy.deepcopy(self.model)))

    @precondition(lambda self: self.snapshots)
    @rule(index=st.integers(0, 10))
    def check_and_release_snapshot(self, index: int) -> None:
        snapshot, expected = self.snapshots.pop(index % len(self.snapshots))
        assert backend_contents(snapshot) == expected
        snapshot.release()

    @invariant()
    def keys_match(self) -> None:
        if not hasattr(self, "backend"):
            return
        for name in ("v", "l", "m"):
            if name in self.backend.state_names():
                got = sorted(self.backend.get_keys(name))
                want = sorted(k for (n, k, ns) in self.model if n == name and ns is None)
                assert got == want

    def teardown(self) -> None:
        if hasattr(self, "backend"):
            for snapshot, expected in self.snapshots:
                assert backend_contents(snapshot) == expected
            assert backend_contents(self.backend.snapshot()) == self.model
            self.backend.close()


class NestedStateMachine(KeyedStateMachine):
    async_snapshots = False


FAST = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
SLOW = settings(
    max_examples=300,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

TestCowModel = KeyedStateMachine.TestCase
TestCowModel.settings = FAST
TestNestedModel = NestedStateMachine.TestCase
TestNestedModel.settings = FAST


@pytest.mark.slow
def test_cow_model_many_examples() -> None:
    case = KeyedStateMachine.TestCase
    case.settings = SLOW
    case().runTest()


def test_snapshot_during_rehash_sees_exactly_its_moment() -> None:
    state_map = CopyOnWriteStateMap(copy_state=list)
    model: dict[int, list[int]] = {}
    snapshots = []
    key = 0
    while len(snapshots) < 5:
        state_map.put(key, None, [key])
        model[key] = [key]
        key += 1
        if state_map.is_rehashing and key % 7 == 0:
            snapshots.append((state_map.snapshot(), copy.deepcopy(model)))
            for k in range(0, key, 5):  # in-place mutation after the snapshot
                lst = state_map.get(k, None)
                lst.append(-1)
                model[k].append(-1)
    for k in range(key, key + 5000):
        state_map.put(k, None, [k])
        model[k] = [k]
    for snap, expected in snapshots:
        assert {k: v for k, _, v in snap.entries()} == expected
        snap.release()
    assert {k: v for k, _, v in state_map.entries()} == model
    assert state_map._required == 0  # every release lowered the required version
