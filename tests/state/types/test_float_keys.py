"""FLOAT keys, FLOAT fields of row keys and FLOAT map user keys: a checkpoint stores them as
32-bit floats, so every backend answers for the float given before and after a restore
(at another parallelism), as RocksDB, which serializes them, does live."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.state import MapStateDescriptor, Types, ValueStateDescriptor
from flinkstate.state.keygroups.hashing import key_group_assigner
from flinkstate.state.types.mapping import BasicTypeInfo, RowTypeInfo

FLOATS = [0.1, 1 / 3, -2.5, 1e-3, 3.0e38, 16777217.0, 7.000001]
FLOAT = BasicTypeInfo("FLOAT")
ROW = RowTypeInfo((BasicTypeInfo("STRING"), FLOAT), ("n", "s"))
VALUE = ValueStateDescriptor("v", Types.LONG())
MAP = MapStateDescriptor("m", Types.FLOAT(), Types.LONG())


def f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def _key(key_type: Any, x: float) -> Any:
    return x if key_type is FLOAT else ("bob", x)


def _stored(key_type: Any, x: float) -> Any:
    return f32(x) if key_type is FLOAT else ("bob", f32(x))


def _fill(backend: Any, key_type: Any) -> None:
    value, entries = backend.get_state(VALUE), backend.get_map_state(MAP)
    for i, x in enumerate(FLOATS):
        backend.set_current_key(_key(key_type, x))
        value.update(i)
        entries.put(x, i)
        entries.put_all({-x: -i})


def _answer(backend: Any, key_type: Any, x: float) -> Any:
    """The value and map entries the backend gives for the float as given."""
    value, entries = backend.get_state(VALUE), backend.get_map_state(MAP)
    backend.set_current_key(_key(key_type, x))
    return value.value(), entries.get(x), entries.contains(-x), sorted(entries.keys())


EXPECTED = [(i, i, True, sorted([f32(x), f32(-x)])) for i, x in enumerate(FLOATS)]


@pytest.mark.parametrize("key_type", [FLOAT, ROW], ids=["float", "row"])
def test_float_keys_answer_live_and_after_a_restore(make_backend: Any, tmp_path: Path, key_type: Any) -> None:
    backend = make_backend(key_type=key_type, max_parallelism=16)
    _fill(backend, key_type)
    assert [_answer(backend, key_type, x) for x in FLOATS] == EXPECTED
    assert sorted(backend.get_keys("v")) == sorted(_stored(key_type, x) for x in FLOATS)
    storage = CheckpointStorage(str(tmp_path))
    pending = storage.begin()
    pending.write_keyed("op", backend)
    checkpoint = pending.commit()
    restored = [storage.load(checkpoint.checkpoint_id).keyed_backend("op", i, 2, backend_factory=make_backend)
                for i in range(2)]  # fmt: skip
    kg = key_group_assigner(key_type)
    for i, x in enumerate(FLOATS):
        owner = next(b for b in restored if kg(_key(key_type, x), 16) in b.key_group_range)
        assert _answer(owner, key_type, x) == EXPECTED[i], x
    keys = sorted(k for b in restored for k in b.get_keys("v"))
    assert keys == sorted(_stored(key_type, x) for x in FLOATS)


def test_rounding_keeps_flinks_key_group() -> None:
    """Flink hashes a FLOAT's 32-bit pattern: the key group of a float and its float32 agree."""
    for key_type in (FLOAT, ROW):
        kg = key_group_assigner(key_type)
        for x in [*FLOATS, float("nan"), float("inf"), -0.0]:
            assert kg(_key(key_type, x), 128) == kg(_key(key_type, f32(x)), 128)
