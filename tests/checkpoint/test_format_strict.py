"""Writing values never changes them: ``pa.array`` truncates 1.7 to 1 for an integer
column (and a datetime to its date), so every value a snapshot writes either reads back
equal and of its kind, or is a ``[TYPE_MISMATCH]``; on the heap (both maps) at the
checkpoint, on RocksDB at ``update()``, and in a process function's output."""

from __future__ import annotations

import datetime
import decimal
import enum
import fractions
from collections import namedtuple
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.checkpoint.arrow_codec import from_arrow, to_arrow
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    RocksDBKeyedStateBackend,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.errors import SerializationError
from flinkstate.state.serializers.lookup import serializer_for


class Level(enum.IntEnum):
    HIGH = 3


Pair = namedtuple("Pair", "n name")

NUMBERS: list[Any] = [
    0, -(2**31), 2**63 - 1, np.int64(5), np.int8(-3), Level.HIGH, True, None,
    1.0, 1.7, -2.5, np.float64(3.0), np.float32(2.5), decimal.Decimal("1.5"),
    decimal.Decimal("2"), fractions.Fraction(3, 2), "7", 2**63,
]  # fmt: skip
INTEGRAL = [Types.BYTE(), Types.SHORT(), Types.INT(), Types.LONG()]
ROW = Types.ROW_NAMED(["n", "name"], [Types.INT(), Types.STRING()])


def _integral(value: Any) -> bool:
    return value is None or (hasattr(type(value), "__index__") and not isinstance(value, bool))


@pytest.mark.parametrize("t", INTEGRAL, ids=str)
@pytest.mark.parametrize("value", NUMBERS, ids=repr)
def test_an_integer_column_takes_integers_only(t: Any, value: Any) -> None:
    try:
        back = from_arrow(to_arrow([value, 1], t), t)
    except SerializationError as exc:
        assert "[TYPE_MISMATCH]" in str(exc)
        in_range = _integral(value) and -(2 ** (t.to_arrow().bit_width - 1)) <= int(value) < 2 ** (
            t.to_arrow().bit_width - 1
        )
        assert not in_range, f"{value!r} fits {t} but was refused"
        return
    assert _integral(value), f"{value!r} was written as {back[0]!r}"
    assert back == [None if value is None else int(value), 1]


def test_the_serializer_and_the_column_refuse_the_same_fractions() -> None:
    """RocksDB serializes at update(); the heap converts at the checkpoint: same verdict."""
    for t in INTEGRAL:
        ser = serializer_for(t)
        for value in NUMBERS:
            if value is None or isinstance(value, str) or value == 2**63:
                continue
            try:
                ser.to_bytes(value)
                serialized = True
            except SerializationError:
                serialized = False
            try:
                to_arrow([value], t)
                written = True
            except SerializationError:
                written = False
            if not serialized:
                assert not written, f"{t}: the column took {value!r}, which the serializer refuses"


@pytest.mark.parametrize(
    ("t", "value"),
    [
        (Types.LIST(Types.LONG()), [1, 2.5]),
        (Types.MAP(Types.STRING(), Types.INT()), {"a": 1, "b": 0.5}),
        (Types.MAP(Types.INT(), Types.STRING()), {1.5: "x"}),
        (Types.ROW_NAMED(["n", "name"], [Types.INT(), Types.STRING()]), Pair(1.5, "é")),
        (
            Types.ROW_NAMED(["n", "name"], [Types.INT(), Types.STRING()]),
            {"n": decimal.Decimal("2.5"), "name": "x"},
        ),
        (Types.LIST(Types.ROW_NAMED(["n", "name"], [Types.LONG(), Types.STRING()])), [(1, "a"), (2.5, "b")]),
        (Types.SQL_DATE(), datetime.datetime(2024, 1, 2, 13, 30)),
        (Types.SQL_TIMESTAMP(), 1.5),
        (Types.LIST(Types.SQL_DATE()), [datetime.date(2024, 1, 2), datetime.datetime(2024, 1, 3, 1)]),
    ],
    ids=repr,
)
def test_nested_fractions_and_datetimes_for_dates_are_refused(t: Any, value: Any) -> None:
    with pytest.raises(SerializationError, match=r"\[TYPE_MISMATCH\]"):
        to_arrow([value], t)


@pytest.mark.parametrize(
    ("t", "value"),
    [
        (Types.LIST(Types.LONG()), [1, np.int64(2), None]),
        (Types.MAP(Types.STRING(), Types.INT()), {"ü": 1, "b": None}),
        (ROW, Pair(Level.HIGH, "名")),
        (Types.SQL_DATE(), datetime.date(2024, 1, 2)),
        (Types.SQL_TIMESTAMP(), datetime.datetime(2024, 1, 2, 3, 4, 5, 6)),
        (Types.DOUBLE(), 3),
    ],
    ids=repr,
)
def test_values_of_their_kind_read_back_equal(t: Any, value: Any) -> None:
    (back,) = from_arrow(to_arrow([value], t), t)
    expected = tuple(value) if isinstance(value, tuple) else value
    assert back == expected


@pytest.mark.parametrize("async_snapshots", [True, False])
def test_a_heap_checkpoint_refuses_a_float_and_keeps_the_previous_one(
    tmp_path: Path, async_snapshots: bool
) -> None:
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), async_snapshots=async_snapshots)
    count = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
    seen = backend.get_list_state(ListStateDescriptor("seen", Types.INT()))
    pages = backend.get_map_state(MapStateDescriptor("pages", Types.STRING(), Types.LONG()))
    backend.set_current_key(7)
    count.update(1)
    storage = CheckpointStorage(str(tmp_path))
    first = storage.begin()
    first.write_keyed("op", backend).result()
    first.commit()
    for write in (lambda: count.update(1.7), lambda: seen.add(2.5), lambda: pages.put("ü", 0.5)):
        write()
        pending = storage.begin()
        with pytest.raises(SerializationError, match=r"\[TYPE_MISMATCH\].*not an integer"):
            pending.write_keyed("op", backend).result()
        pending.abort()
        backend.set_current_key(7)
        count.update(1)
        seen.clear()
        pages.clear()
    restored = open_checkpoint(str(tmp_path)).keyed_backend("op", 0, 1)
    restored.set_current_key(7)
    assert restored.get_state(ValueStateDescriptor("count", Types.LONG())).value() == 1


def test_rocksdb_refuses_a_float_at_update(tmp_path: Path) -> None:
    with RocksDBKeyedStateBackend(str(tmp_path / "db"), key_type=Types.LONG()) as backend:
        count = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
        backend.set_current_key(7)
        with pytest.raises(SerializationError, match=r"\[SERIALIZATION\]"):
            count.update(1.7)
        assert count.value() is None
        count.update(np.int64(5))  # an integer of another class, as on the heap
        assert count.value() == 5


def test_process_output_names_the_column_a_float_does_not_fit() -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from flinkstate.connector import ProcessError
    from flinkstate.connector.process.output import OutputSchema

    schema = OutputSchema.of(
        StructType([StructField("word", StringType()), StructField("count", LongType())])
    )
    rows = schema.normalize([("a", 1), {"word": "b", "count": 1.7}])
    try:
        to_arrow(rows, schema.type_info)
    except SerializationError as exc:
        error = schema.diagnose(rows, exc)
    else:
        raise AssertionError("a float was written into a bigint column")
    assert isinstance(error, ProcessError)
    assert "[OUTPUT_SCHEMA_MISMATCH]" in str(error) and "'count'" in str(error)


@pytest.mark.parametrize(
    ("info", "samples"),
    [
        (Types.MAP(Types.STRING(), Types.LONG()), [{"a": 1, "b": None}, {}, None]),
        (Types.LIST(Types.MAP(Types.INT(), Types.STRING())), [[{1: "x"}, {}], [], None]),
        (
            Types.ROW_NAMED(["m"], [Types.MAP(Types.STRING(), Types.LIST(Types.INT()))]),
            [({"k": [1, None]},), None],
        ),
    ],
)
def test_maps_nested_anywhere_read_back_as_dicts(info: Any, samples: list[Any]) -> None:
    """from_arrow asks Arrow for dicts only where a map is (the slow conversion): a map in a
    list or a row is found there too."""
    assert from_arrow(to_arrow(samples, info), info) == samples
