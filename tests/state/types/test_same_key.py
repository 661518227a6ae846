"""One rule for "the same key", Flink's (floats by bits, one NaN), on every backend.

Every NaN (any sign or payload, numpy's too) is one key and one map user key; ``0.0`` and
``-0.0`` are two, also when they share a key group (max parallelism 1 or 2). Random
operations are compared against a plain model keyed by the bits of the canonical float,
live and after a checkpoint and a restore (at parallelism 1 and 2).
"""

from __future__ import annotations

import math
import operator
import random
import struct
from collections import namedtuple
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.state import MapStateDescriptor, Types, ValueStateDescriptor
from flinkstate.state.keygroups.hashing import key_group_assigner
from flinkstate.state.types.canonical import NAN, NEGATIVE_ZERO, canonical_key, key_token
from flinkstate.state.types.mapping import BasicTypeInfo, RowTypeInfo

NANS = [
    float("nan"),
    -float("nan"),
    struct.unpack(">d", b"\x7f\xf8\x00\x00\x00\x00\x00\x01")[0],  # a payload
    struct.unpack(">d", b"\xff\xf0\x00\x00\x00\x00\x00\x07")[0],  # negative, signalling
    float(np.float64("nan")),
]
VALUE = ValueStateDescriptor("v", Types.LONG())
MAP = MapStateDescriptor("m", Types.DOUBLE(), Types.LONG())
DOUBLE = BasicTypeInfo("DOUBLE")
ROW = RowTypeInfo((BasicTypeInfo("STRING"), DOUBLE), ("s", "d"))


def bits(x: float) -> bytes:
    """The model's identity of a float: Java's doubleToLongBits."""
    return b"\x7f\xf8" + bytes(6) if math.isnan(x) else struct.pack(">d", x)


def test_canonical_rule() -> None:
    assert all(canonical_key(x, DOUBLE) is NAN for x in NANS)
    assert canonical_key(-0.0, DOUBLE) is NEGATIVE_ZERO and canonical_key(0.0, DOUBLE) == 0.0
    assert NEGATIVE_ZERO != 0.0 and operator.ne(0.0, NEGATIVE_ZERO) and NEGATIVE_ZERO == -0.0
    assert bits(NEGATIVE_ZERO) == bits(-0.0) and str(NEGATIVE_ZERO) == "-0.0"
    assert len({canonical_key(x, DOUBLE) for x in [*NANS, 0.0, -0.0, 0.0, -0.0]}) == 3
    assert canonical_key(("a", -0.0), ROW) == ("a", NEGATIVE_ZERO)
    assert len({key_token(v) for v in [{"s": "a", "d": -0.0}, ("a", -0.0), ["a", -0.0]]}) == 1
    assert len({key_token(v) for v in [("a", NANS[0]), {"s": "a", "d": NANS[2]}, ("a", 0.0)]}) == 2


def _restored(storage: CheckpointStorage, backend: Any, make_backend: Any, p: int) -> list[Any]:
    pending = storage.begin()
    pending.write_keyed("op", backend)
    cid = pending.commit().checkpoint_id
    return [storage.load(cid).keyed_backend("op", i, p, backend_factory=make_backend) for i in range(p)]


def _owner(backends: list[Any], key: Any, key_type: Any) -> Any:
    kg = key_group_assigner(key_type)(key, backends[0].max_parallelism)
    return next(b for b in backends if kg in b.key_group_range)


def test_a_nan_key_and_user_key_read_back_after_a_restore(
    make_backend: Any, location: tuple[str, dict[str, Any]]
) -> None:
    backend = make_backend(key_type=DOUBLE, max_parallelism=8)
    value, entries = backend.get_state(VALUE), backend.get_map_state(MAP)
    backend.set_current_key(NANS[0])
    value.update(7)
    entries.put(NANS[1], 1)
    entries.put_all({NANS[2]: 2})
    for backend_now in [[backend], _restored(CheckpointStorage(*location), backend, make_backend, 2)]:
        for nan in NANS:
            b = _owner(backend_now, nan, DOUBLE)
            b.set_current_key(nan)
            assert b.get_state(VALUE).value() == 7
            m = b.get_map_state(MAP)
            assert [m.get(x) for x in NANS] == [2] * len(NANS) and all(m.contains(x) for x in NANS)
            assert len(list(m.keys())) == 1 and math.isnan(next(iter(m.keys())))
        keys = [k for b in backend_now for k in b.get_keys("v")]
        assert len(keys) == 1 and math.isnan(keys[0])


@pytest.mark.parametrize("max_parallelism", [1, 2, 128])
def test_zero_and_negative_zero_are_two_keys_and_two_user_keys(
    make_backend: Any, tmp_path: Path, max_parallelism: int
) -> None:
    backend = make_backend(key_type=DOUBLE, max_parallelism=max_parallelism)
    value, entries = backend.get_state(VALUE), backend.get_map_state(MAP)
    for i, key in enumerate([0.0, -0.0]):
        backend.set_current_key(key)
        value.update(i)
        entries.put(0.0, 10 + i)
        entries.put(-0.0, 20 + i)
    restored = _restored(CheckpointStorage(str(tmp_path)), backend, make_backend, 1)
    for b in (backend, restored[0]):
        assert sorted(bits(k) for k in b.get_keys("v")) == sorted([bits(0.0), bits(-0.0)])
        for i, key in enumerate([0.0, -0.0]):
            b.set_current_key(key)
            m = b.get_map_state(MAP)
            assert b.get_state(VALUE).value() == i
            assert (m.get(0.0), m.get(-0.0)) == (10 + i, 20 + i)
            assert sorted(bits(k) for k, _ in m.items()) == sorted([bits(0.0), bits(-0.0)])
            m.remove(-0.0)
            assert (m.get(0.0), m.get(-0.0), m.contains(-0.0)) == (10 + i, None, False)


@pytest.mark.parametrize("key_type", [DOUBLE, ROW, None], ids=["double", "row", "inferred"])
@pytest.mark.parametrize("seed", range(3))
def test_random_operations_match_a_model_keyed_by_bits(
    make_backend: Any, tmp_path: Path, key_type: Any, seed: int
) -> None:
    rng = random.Random(seed)
    floats = [*NANS, 0.0, -0.0, 1.5, -1.5, np.float64(-0.0)]
    as_key = (lambda x: x) if key_type is not ROW else (lambda x: ("k", x))
    backend = make_backend(key_type=key_type, max_parallelism=2)
    model_values: dict[bytes, int] = {}
    model_maps: dict[bytes, dict[bytes, int]] = {}
    for step in range(300):
        x, u = rng.choice(floats), rng.choice(floats)
        backend.set_current_key(as_key(x))
        op = rng.randrange(5)
        if op == 0:
            backend.get_state(VALUE).update(step)
            model_values[bits(x)] = step
        elif op == 1:
            backend.get_state(VALUE).clear()
            model_values.pop(bits(x), None)
        elif op == 2:
            backend.get_map_state(MAP).put(u, step)
            model_maps.setdefault(bits(x), {})[bits(u)] = step
        elif op == 3:
            backend.get_map_state(MAP).remove(u)
            model_maps.get(bits(x), {}).pop(bits(u), None)
            if not model_maps.get(bits(x), True):
                del model_maps[bits(x)]
        else:
            assert backend.get_map_state(MAP).get(u) == model_maps.get(bits(x), {}).get(bits(u))

    def answers(backends: list[Any]) -> tuple[dict[bytes, int], dict[bytes, dict[bytes, int]]]:
        values, maps = {}, {}
        for b in backends:
            value, entries = b.get_state(VALUE), b.get_map_state(MAP)
            for key in b.get_keys("v"):
                b.set_current_key(key)
                values[bits(key[1] if key_type is ROW else key)] = value.value()
            for key in b.get_keys("m"):
                b.set_current_key(key)
                maps[bits(key[1] if key_type is ROW else key)] = {bits(k): v for k, v in entries.items()}
        return values, maps

    assert answers([backend]) == (model_values, model_maps)
    storage = CheckpointStorage(str(tmp_path))
    assert answers(_restored(storage, backend, make_backend, 2)) == (model_values, model_maps)


def test_nested_rows_are_plain_tuples(make_backend: Any) -> None:
    """A namedtuple inside a row key is the plain tuple of its fields: one key, listed plain."""
    inner = namedtuple("inner", "x y")
    backend = make_backend(max_parallelism=4)  # the type inferred from the first key
    value = backend.get_state(VALUE)
    for i, key in enumerate([("a", inner(1, -0.0)), ("a", (1, -0.0)), ("a", (1, 0.0))]):
        backend.set_current_key(key)
        value.update(i)
    keys = sorted(backend.get_keys("v"), key=lambda k: bits(k[1][1]))
    assert keys == [("a", (1, 0.0)), ("a", (1, -0.0))]
    assert [type(k[1]) for k in keys] == [tuple, tuple]
    assert [bits(k[1][1]) for k in keys] == [bits(0.0), bits(-0.0)]
    backend.set_current_key(("a", inner(1, -0.0)))
    assert value.value() == 1
