"""Keys are values: every key a backend accepts reads back the same under every spelling of it,
on every backend and after a checkpoint round trip."""

from __future__ import annotations

import enum
import uuid
from collections import namedtuple
from typing import Any

import numpy as np
import pytest
from pyspark.sql import Row

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.state import FlinkStateError, MapStateDescriptor, Types, ValueStateDescriptor

COUNT = ValueStateDescriptor("count", Types.LONG())
SEEN = MapStateDescriptor("seen", Types.STRING(), Types.LONG())
Pair = namedtuple("Pair", "user n")


class Level(enum.IntEnum):
    HIGH = 7


class MyTuple(tuple):  # a plain tuple subclass, as user code has them
    pass


class MyStr(str):
    pass


PAIR = Types.ROW_NAMED(["user", "n"], [Types.STRING(), Types.LONG()])

# (key type, [spellings of one key: the first is the canonical value], [other keys])
CASES: dict[str, tuple[Any, list[Any], list[Any]]] = {
    "long": (Types.LONG(), [7, np.int64(7), Level.HIGH], [-(1 << 63), (1 << 63) - 1, 0]),
    "int": (Types.INT(), [-5, np.int32(-5)], [(1 << 31) - 1, -(1 << 31)]),
    "short": (Types.SHORT(), [300, np.int16(300)], [-(1 << 15), (1 << 15) - 1]),
    "byte": (Types.BYTE(), [-3, np.int8(-3)], [127, -128]),
    "double": (Types.DOUBLE(), [2.0, 2, np.float64(2.0)], [1.5, -1e300]),
    "float": (Types.FLOAT(), [1.5, np.float32(1.5)], [-2.25]),
    "boolean": (Types.BOOLEAN(), [True, np.bool_(True)], [False]),
    "string": (Types.STRING(), ["ü-😀", MyStr("ü-😀")], ["", "a"]),
    "bytes": (
        Types.PRIMITIVE_ARRAY(Types.BYTE()),
        [b"\x00\xff", bytearray(b"\x00\xff"), memoryview(b"\x00\xff")],
        [b"", b"x"],
    ),
    "row": (PAIR, [("x", 1), Pair("x", 1), Row(user="x", n=1), MyTuple(("x", 1))], [("x", 2), ("y", 1)]),
    "inferred-row": (None, [("x", 1), Row(user="x", n=1), Pair("x", 1)], [("x", 2)]),
}


def _exercise(backend: Any, spellings: list[Any], others: list[Any]) -> None:
    count = backend.get_state(COUNT)
    seen = backend.get_map_state(SEEN)
    for i, spelling in enumerate(spellings[::-1] + spellings):  # the last spelling comes first
        backend.set_current_key(spelling)
        count.update((count.value() or 0) + 1)
        seen.put(f"spelling {i % len(spellings)}", i)
    for other in others:
        backend.set_current_key(other)
        count.update(100)


def _check(backend: Any, spellings: list[Any], others: list[Any]) -> None:
    canonical = spellings[0]
    count = backend.get_state(COUNT)
    seen = backend.get_map_state(SEEN)
    for spelling in spellings:
        backend.set_current_key(spelling)
        assert count.value() == 2 * len(spellings)
        assert len(list(seen.keys())) == len(spellings)
    keys = list(backend.get_keys("count"))
    assert sorted(map(repr, keys)) == sorted(map(repr, [canonical, *others]))
    for key in keys:
        assert type(key) is type(canonical)
    assert [type(k) for k in backend.get_keys("seen")] == [type(canonical)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_spelling_of_a_key_is_one_key(make_backend: Any, case: str) -> None:
    key_type, spellings, others = CASES[case]
    backend = make_backend(key_type=key_type)
    _exercise(backend, spellings, others)
    _check(backend, spellings, others)


@pytest.mark.parametrize("case", sorted(CASES))
def test_keys_survive_a_checkpoint_round_trip(make_backend: Any, case: str) -> None:
    key_type, spellings, others = CASES[case]
    backend = make_backend(key_type=key_type)
    _exercise(backend, spellings, others)
    root = f"memory://keys-{uuid.uuid4().hex}"
    pending = CheckpointStorage(root).begin()
    pending.write_keyed("op", backend)
    pending.commit()
    for parallelism in (1, 2):
        restored = [
            open_checkpoint(root).keyed_backend(
                "op", i, parallelism, backend_factory=make_backend, key_type=key_type
            )
            for i in range(parallelism)
        ]
        owner = next(b for b in restored if _owns(b, spellings[0]))
        _check(owner, spellings, [o for o in others if _owns(owner, o)])


def _owns(backend: Any, key: Any) -> bool:
    try:
        backend.set_current_key(key)
    except FlinkStateError:
        return False
    return True


@pytest.mark.parametrize(
    ("key_type", "bad", "code"),
    [
        (Types.LONG(), True, "KEY_TYPE_MISMATCH"),
        (Types.LONG(), "7", "KEY_TYPE_MISMATCH"),
        (Types.LONG(), 1 << 63, "INVALID_KEY"),
        (Types.INT(), 1 << 31, "INVALID_KEY"),
        (Types.BYTE(), 128, "INVALID_KEY"),
        (Types.STRING(), b"x", "KEY_TYPE_MISMATCH"),
        (PAIR, ("x", "not a long"), "INVALID_KEY"),
        (PAIR, ("x",), "INVALID_KEY"),
        (Types.LONG(), None, "INVALID_KEY"),
    ],
)
def test_keys_of_the_wrong_type_are_refused(make_backend: Any, key_type: Any, bad: Any, code: str) -> None:
    backend = make_backend(key_type=key_type)
    with pytest.raises(FlinkStateError, match=rf"\[{code}\]"):
        backend.set_current_key(bad)
