"""The C batch encoder of a key group's entries (``state/serializers/_batch.c``) against the
per-value path (``TypeSerializer.to_bytes``, sorted and framed in Python): the same bytes for
every atomic key and value type, with and without TTL, or None (the per-value path) where a
value is not natively of its kind."""

from __future__ import annotations

import enum
import math
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flinkstate.checkpoint.flink.streams.header_write import KeyedStateSpec
from flinkstate.checkpoint.flink.streams.keyed_write import EntryEncoder, _framed
from flinkstate.state import Types
from flinkstate.state.errors import SerializationError
from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.serializers import batch
from flinkstate.state.serializers.lookup import serializer_for
from flinkstate.state.types.mapping import TypeInformation

_FLOAT32 = st.floats(width=32, allow_nan=True) | st.sampled_from([-0.0, 3.4e38, -3.4e38, 1e-45, 0.1])
_TEXT = st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)

TYPES: dict[str, tuple[TypeInformation, st.SearchStrategy[Any]]] = {
    "LONG": (Types.LONG(), st.integers(-(2**63), 2**63 - 1)),
    "INT": (Types.INT(), st.integers(-(2**31), 2**31 - 1)),
    "SHORT": (Types.SHORT(), st.integers(-(2**15), 2**15 - 1)),
    "BYTE": (Types.BYTE(), st.integers(-128, 127)),
    "BOOLEAN": (Types.BOOLEAN(), st.booleans()),
    "DOUBLE": (Types.DOUBLE(), st.floats(allow_nan=True) | st.sampled_from([-0.0, math.nan, -math.nan])),
    "FLOAT": (Types.FLOAT(), _FLOAT32),
    "CHAR": (Types.CHAR(), st.characters(max_codepoint=0xFFFF, codec=None)),
    "STRING": (Types.STRING(), _TEXT | st.sampled_from(["", "\ud800", "a\udfffb", "\U0001f600x", "é" * 200])),
    "BYTES": (Types.PRIMITIVE_ARRAY(Types.BYTE()), st.binary(max_size=20)),
}


def _encoder(value: str, key: str, ttl: bool, max_parallelism: int = 128) -> EntryEncoder:
    return EntryEncoder(
        KeyedStateSpec("s", "VALUE", TYPES[value][0], ttl=ttl), TYPES[key][0], max_parallelism
    )


def _per_value(encoder: EntryEncoder, kg: int, columns: StateColumns) -> bytes:
    return _framed(encoder.pairs(kg, columns))


def test_every_atomic_serializer_has_a_kind() -> None:
    for name, (info, _) in TYPES.items():
        assert batch.batch_kind(serializer_for(info)) is not None, name
    assert batch.batch_kind(serializer_for(Types.PICKLED_BYTE_ARRAY())) is None
    assert batch.batch_kind(serializer_for(Types.LIST(Types.LONG()))) is None


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    key=st.sampled_from(sorted(TYPES)),
    value=st.sampled_from(sorted(TYPES)),
    ttl=st.booleans(),
)
def test_the_same_bytes_as_the_per_value_path(data: st.DataObject, key: str, value: str, ttl: bool) -> None:
    keys = data.draw(st.lists(TYPES[key][1], max_size=30, unique_by=lambda k: struct.pack(">d", k)
                              if isinstance(k, float) else (type(k), k)))  # fmt: skip
    values = [data.draw(TYPES[value][1] | st.none()) for _ in keys]
    stamps = [data.draw(st.integers(-(2**63), 2**63 - 1)) for _ in keys] if ttl else None
    max_parallelism = data.draw(st.sampled_from([128, 32768]))
    encoder = _encoder(value, key, ttl, max_parallelism)
    kg = data.draw(st.integers(0, max_parallelism - 1))
    columns = StateColumns(keys, None, values, stamps)
    assert encoder._batch is not None
    head, kinds = kg.to_bytes(encoder.prefix, "big"), encoder._batch
    fast = batch.encode_block(head, b"\x00", keys, kinds[0], values, kinds[1], stamps)
    assert fast is not None
    assert fast == _per_value(encoder, kg, columns) == encoder.encode(kg, columns)


class Level(enum.IntEnum):
    HIGH = 7


@pytest.mark.parametrize(
    ("key", "value", "keys", "values"),
    [
        ("LONG", "LONG", [np.int64(3)], [1]),  # numpy ints: the per-value path takes them
        ("LONG", "LONG", [1], [Level.HIGH]),  # an IntEnum is an int subclass
        ("LONG", "INT", [1], [2**31]),  # out of range: the per-value path raises
        ("LONG", "LONG", [2**64], [1]),
        ("LONG", "DOUBLE", [1], [2]),  # an int for a DOUBLE: allowed, by the per-value path
        ("LONG", "FLOAT", [1], [1e39]),  # too large for a float: refused there
        ("STRING", "LONG", [None], [1]),  # a null key
        ("LONG", "BOOLEAN", [1], [1]),
        ("LONG", "BYTES", [1], [bytearray(b"x")]),
        ("LONG", "CHAR", [1], ["ab"]),
        ("LONG", "STRING", [1], [b"bytes"]),
    ],
)
def test_anything_not_native_takes_the_per_value_path(
    key: str, value: str, keys: list[Any], values: list[Any]
) -> None:
    encoder = _encoder(value, key, ttl=False)
    assert encoder._batch is not None
    assert (
        batch.encode_block(b"\x01", b"\x00", keys, encoder._batch[0], values, encoder._batch[1], None) is None
    )
    columns = StateColumns(keys, None, values)
    try:
        expected: bytes | type[Exception] = _per_value(encoder, 1, columns)
    except SerializationError:
        expected = SerializationError
    if expected is SerializationError:
        with pytest.raises(SerializationError, match=r"state s, key"):
            encoder.encode(1, columns)
    else:
        assert encoder.encode(1, columns) == expected


def test_a_ttl_entry_without_its_timestamp_is_refused() -> None:
    encoder = _encoder("STRING", "LONG", ttl=True)
    with pytest.raises(SerializationError, match="last-access timestamp"):
        encoder.encode(3, StateColumns([1, 2], None, ["a", "b"], [5, None]))


def test_no_entries_and_only_nulls_give_an_empty_block() -> None:
    encoder = _encoder("STRING", "LONG", ttl=False)
    assert encoder.encode(0, StateColumns([], None, [])) == b""
    assert encoder.encode(0, StateColumns([1, 2], None, [None, None])) == b""
