"""The int64 fast path of a checkpoint write: a state of plain int keys and values is read
out of the snapshot as int64 buffers. It must give exactly the entries ``columns`` gives,
write byte-identical files, and step aside for anything else (the generic conversion then
raises its typed errors)."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.checkpoint.format import write_keyed
from flinkstate.state import (
    HeapKeyedStateBackend,
    ReducingStateDescriptor,
    SerializationError,
    StateTtlConfig,
    Time,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.heap.state_map import _tables
from flinkstate.state.heap.state_table import HeapStateSnapshot
from flinkstate.state.keyed.snapshot import StateSnapshot

EDGES = [0, 1, -1, 2**63 - 1, -(2**63), 2**31, -(2**31) - 1]
Values = dict[int, Any]


def _model(seed: int, n: int) -> Values:
    rng = random.Random(seed)
    keys = EDGES + [rng.randrange(-(2**63), 2**63) for _ in range(n)]
    return {k: rng.choice([*EDGES, rng.randrange(-(2**40), 2**40)]) for k in keys}


def _fill(backend: Any, model: Values, reducing: bool = False) -> None:
    if reducing:
        sums = backend.get_reducing_state(ReducingStateDescriptor("sum", lambda a, b: a + b, Types.LONG()))
    value = backend.get_state(ValueStateDescriptor("v", Types.LONG()))
    for k, v in model.items():
        backend.set_current_key(k)
        if reducing:
            sums.add(v)
        else:
            value.update(v)


def _decode(data: bytes) -> list[int]:
    return [int.from_bytes(data[i : i + 8], sys.byteorder, signed=True) for i in range(0, len(data), 8)]


def test_int64_columns_are_the_columns(make_backend: Callable[..., Any]) -> None:
    backend = make_backend(key_type=Types.LONG())
    model = _model(1, 3000)
    _fill(backend, model)
    with backend.snapshot() as snap:
        state = snap.states["v"]
        seen: Values = {}
        for kg in snap.key_group_range:
            fast, cols = state.int64_columns(kg), state.columns(kg)
            if isinstance(state, HeapStateSnapshot) and _tables is not None:
                assert fast is not None, "the heap snapshot did not take the fast path"
            if fast is not None:
                assert _decode(fast.keys) == cols.keys and _decode(fast.values) == cols.values
                assert len(fast) == len(cols)
            seen.update(zip(cols.keys, cols.values, strict=True))
        assert seen == model


@pytest.mark.parametrize("async_snapshots", [True, False])
@pytest.mark.parametrize(
    "odd", [True, 2**63, -(2**63) - 1, 1.5, "7"], ids=["bool", "too-big", "too-small", "float", "str"]
)
def test_anything_but_int64_ints_steps_aside(async_snapshots: bool, odd: Any) -> None:
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), async_snapshots=async_snapshots)
    model = _model(2, 500)
    _fill(backend, model)
    odd_key = next(iter(model))
    backend.set_current_key(odd_key)
    backend.get_state(ValueStateDescriptor("v", Types.LONG())).update(odd)
    with backend.snapshot() as snap:
        state = snap.states["v"]
        kg = next(kg for kg in snap.key_group_range if odd_key in state.columns(kg).keys)
        assert state.int64_columns(kg) is None
        with pytest.raises(SerializationError, match=r"\[TYPE_MISMATCH\]"):  # 1.5 too: never truncated
            write_keyed(state, Types.LONG(), snap.key_group_range)


def test_namespaces_and_ttl_take_the_generic_path() -> None:
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    ttl = ValueStateDescriptor("ttl", Types.LONG())
    ttl.enable_time_to_live(StateTtlConfig.new_builder(Time.hours(1)).build())
    for k in range(200):
        backend.set_current_key(k)
        backend.get_state(ttl).update(k)
        backend.get_partitioned_state(k % 3, ValueStateDescriptor("ns", Types.LONG())).update(-k)
    with backend.snapshot() as snap:
        for state in snap.states.values():
            assert all(state.int64_columns(kg) is None for kg in snap.key_group_range)


@pytest.mark.parametrize("async_snapshots", [True, False])
def test_the_fast_path_writes_the_same_bytes(async_snapshots: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), async_snapshots=async_snapshots)
    _fill(backend, _model(3, 5000))
    _fill(backend, _model(4, 2000), reducing=True)
    with backend.snapshot() as snap:
        fast = {n: write_keyed(s, Types.LONG(), snap.key_group_range) for n, s in snap.states.items()}
        monkeypatch.setattr(StateSnapshot, "int64_columns", lambda self, kg: None)
        monkeypatch.setattr(HeapStateSnapshot, "int64_columns", lambda self, kg: None)
        slow = {n: write_keyed(s, Types.LONG(), snap.key_group_range) for n, s in snap.states.items()}
    for name in ("v", "sum"):
        assert bytes(memoryview(fast[name].data)) == bytes(memoryview(slow[name].data))
        assert fast[name].key_groups == slow[name].key_groups and fast[name].rows == slow[name].rows


def test_round_trip_through_a_checkpoint(tmp_path: Any) -> None:
    model = _model(5, 4000)
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    _fill(backend, model)
    pending = CheckpointStorage(str(tmp_path)).begin()
    pending.write_keyed("op", backend).result()
    pending.commit()
    restored = open_checkpoint(str(tmp_path)).keyed_backend("op", 0, 1)
    state = restored.get_state(ValueStateDescriptor("v", Types.LONG()))
    got = {}
    for k in model:
        restored.set_current_key(k)
        got[k] = state.value()
    assert got == model
    restored.close()
