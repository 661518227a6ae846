"""HeapValueState's C fast path against its Python methods (the model and the fallback).

Two heap backends get the same random operations: one through ``value()``/``update()``
(the C functions when the accelerator is built), the other through the Python methods
called directly. Every read, the final contents, and the change records must agree, over
the keys users pass (ints, unicode, namedtuples, plain tuples), namespaces, removals,
snapshots held (copy-on-write: the slow path), recording on and off, and growth (rehash).
"""

from __future__ import annotations

import random
from collections import namedtuple
from typing import Any

import pytest

from flinkstate.state import HeapKeyedStateBackend, StateAccessError, Types, ValueStateDescriptor
from flinkstate.state.heap import value_state

VALUE_PY, UPDATE_PY = value_state.PYTHON_METHODS
Point = namedtuple("Point", "x y")

KEYS: dict[str, Any] = {
    "long": (Types.LONG(), lambda i: i - 500),
    "unicode": (Types.STRING(), lambda i: f"ключ-{i}-🔑"),
    "namedtuple": (Types.PICKLED_BYTE_ARRAY(), lambda i: Point(i, str(i))),
    "tuple": (Types.ROW([Types.LONG(), Types.STRING()]), lambda i: (i, f"s{i}")),
}
VALUES: dict[str, Any] = {
    "long": (Types.LONG(), lambda r: r.choice([r.randrange(-(2**63), 2**63), 0, None])),
    "unicode": (Types.STRING(), lambda r: r.choice([f"ü{r.random()}", "", None])),
}
"""Immutable value types only: a state of mutable values keeps both methods in Python."""


def test_the_accelerator_is_installed_where_built() -> None:
    if value_state._valuepath is None:
        pytest.skip("the C accelerator is not built here (no compiler at install): the Python path is tested")
    assert value_state.HeapValueState.value is not VALUE_PY
    assert value_state.HeapValueState.update is not UPDATE_PY


@pytest.mark.parametrize("key_kind", sorted(KEYS))
@pytest.mark.parametrize("value_kind", sorted(VALUES))
@pytest.mark.parametrize("async_snapshots", [True, False], ids=["cow", "nested"])
def test_c_and_python_paths_agree(key_kind: str, value_kind: str, async_snapshots: bool) -> None:
    key_type, make_key = KEYS[key_kind]
    value_type, make_value = VALUES[value_kind]
    rng = random.Random(f"{key_kind}-{value_kind}")
    backends = [
        HeapKeyedStateBackend(key_type=key_type, max_parallelism=8, async_snapshots=async_snapshots)
        for _ in range(2)
    ]
    desc = ValueStateDescriptor("v", value_type)
    states = [b.get_state(desc) for b in backends]
    held: list[Any] = []
    keys = [make_key(i) for i in range(3000)]
    for step in range(20_000):
        op = rng.random()
        if op < 0.002:  # take or release a snapshot (held: every write takes the slow path)
            if held:
                for snap in held.pop():
                    snap.release()
            else:
                held.append([b.snapshot() for b in backends])
            continue
        if op < 0.003:  # start a new epoch of the change record
            for b in backends:
                b.snapshot_for_checkpoint(step).release()
            continue
        key, namespace = rng.choice(keys), rng.choice([None, None, None, "w1", "ω2"])
        value = make_value(rng)
        for b, s in zip(backends, states, strict=True):
            b.set_current_key(key)
            s.set_current_namespace(namespace)
        if op < 0.5:
            assert states[0].value() == VALUE_PY(states[1])
        else:
            states[0].update(value)
            UPDATE_PY(states[1], value)
    for snaps in held:
        for snap in snaps:
            snap.release()
    tables = [b.table("v") for b in backends]
    for kgi in range(len(tables[0].maps)):
        assert sorted(map(repr, tables[0].maps[kgi].entries())) == sorted(
            map(repr, tables[1].maps[kgi].entries())
        )
    assert [list(map(repr, c)) for c in tables[0].changes] == [list(map(repr, c)) for c in tables[1].changes]
    for b in backends:
        b.close()


@pytest.mark.parametrize("async_snapshots", [True, False], ids=["cow", "nested"])
def test_mutable_values_stay_off_the_c_path_and_their_reads_record(async_snapshots: bool) -> None:
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=1, async_snapshots=async_snapshots)
    longs = backend.get_state(ValueStateDescriptor("n", Types.LONG()))
    lists = backend.get_state(ValueStateDescriptor("l", Types.LIST(Types.LONG())))
    assert type(longs).value is value_state.HeapValueState.value
    assert type(lists).value is not value_state.HeapValueState.value
    assert type(lists).update is UPDATE_PY
    backend.set_current_key(1)
    longs.update(5)
    lists.update([5])
    backend.snapshot_for_checkpoint(1).release()  # recording starts: a new epoch
    assert longs.value() == 5 and lists.value() == [5]
    assert backend.table("n").changes[0] == []  # an immutable read records nothing
    assert backend.table("l").changes[0] == [1, [5]]
    backend.set_current_key(2)
    assert lists.value() is None and backend.table("l").changes[0] == [1, [5]]  # nothing to hand out
    backend.close()


def test_hot_keys_compact_the_record_on_the_c_path() -> None:
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=1)
    state = backend.get_state(ValueStateDescriptor("v", Types.LONG()))
    for k in range(10):
        backend.set_current_key(k)
        state.update(k)
    backend.snapshot_for_checkpoint(1).release()
    table = backend.table("v")
    table_changes = table.changes[0]
    for i in range(200_000):
        backend.set_current_key(i % 10)
        state.update(i)
    assert len(table_changes) <= 2 * 65_536 + 2  # compacted as it grew: bounded
    with backend.snapshot_for_checkpoint(2) as snap:
        assert snap.changes is not None
        assert snap.changes.changed("v", 0) == {k: 199_990 + k for k in range(10)}
    backend.close()


def test_no_current_key_and_a_closed_backend_fail_as_in_python() -> None:
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=4)
    state = backend.get_state(ValueStateDescriptor("v", Types.LONG()))
    for call in (state.value, lambda: state.update(1)):
        with pytest.raises(StateAccessError, match="NO_CURRENT_KEY"):
            call()
    backend.set_current_key(1)
    state.update(7)
    assert state.value() == 7
    backend.close()
    for call in (state.value, lambda: state.update(1)):
        with pytest.raises(StateAccessError, match="BACKEND_CLOSED"):
            call()
