"""Serializers: round trips for every type, Flink's exact byte layouts, copies, bad input."""

from __future__ import annotations

import datetime
import decimal
import itertools
import math
import struct
import threading
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flinkstate.state import SerializationError, TypeInformation, Types
from flinkstate.state.serializers.lookup import serializer_for
from flinkstate.state.types.mapping import ArrowTypeInfo

UTC = datetime.timezone.utc
Strategy = st.SearchStrategy[Any]
TypedStrategy = st.SearchStrategy[tuple[TypeInformation, Strategy]]


def ints(bits: int) -> Strategy:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return st.integers(lo, hi) | st.sampled_from([lo, hi, 0, -1])


def decimals() -> Strategy:
    def build(unscaled: int, scale: int) -> decimal.Decimal:
        digits = tuple(int(d) for d in str(abs(unscaled)))
        return decimal.Decimal((unscaled < 0, digits, -scale))

    return st.builds(build, st.integers(-(10**45), 10**45), st.integers(-40, 40))


def utf16_text() -> Strategy:
    """Any text, lone surrogates included (a high surrogate directly followed by a low one
    is one UTF-16 pair and reads back as one code point, so it is left out here)."""
    chars = st.characters(codec=None) | st.integers(0xD800, 0xDFFF).map(chr)
    return st.text(chars).filter(
        lambda s: (
            not any("\ud800" <= a <= "\udbff" and "\udc00" <= b <= "\udfff" for a, b in itertools.pairwise(s))
        )
    )


KEYABLE: dict[str, Strategy] = {
    "STRING": utf16_text(),
    "CHAR": st.characters(max_codepoint=0xFFFF, codec=None) | st.integers(0xD800, 0xDFFF).map(chr),
    "BOOLEAN": st.booleans(),
    "BYTE": ints(8),
    "SHORT": ints(16),
    "INT": ints(32),
    "LONG": ints(64),
    "BIG_DEC": decimals(),
    "SQL_DATE": st.dates(),
    "SQL_TIMESTAMP": st.datetimes(),
}
ATOMIC: dict[str, Strategy] = {
    **KEYABLE,
    "FLOAT": st.floats(width=32, allow_nan=False),
    "DOUBLE": st.floats(allow_nan=False),
    "SQL_TIME": st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
    "INSTANT": st.datetimes(
        min_value=datetime.datetime(2, 1, 1),
        max_value=datetime.datetime(9998, 12, 31),
        timezones=st.sampled_from([UTC, datetime.timezone(datetime.timedelta(hours=-7))]),
    ),
}
BYTES = (Types.PRIMITIVE_ARRAY(Types.BYTE()), st.binary())
LEAVES: list[tuple[TypeInformation, Strategy]] = [
    *((getattr(Types, name)(), strategy) for name, strategy in ATOMIC.items()),
    BYTES,
    (Types.PRIMITIVE_ARRAY(Types.INT()), st.lists(ints(32), max_size=4)),
    (Types.BASIC_ARRAY(Types.LONG()), st.lists(st.none() | ints(64), max_size=4)),
    (Types.BASIC_ARRAY(Types.STRING()), st.lists(st.none() | utf16_text(), max_size=4)),
    (Types.PICKLED_BYTE_ARRAY(), st.recursive(st.integers() | st.text(), st.lists, max_leaves=5)),
    (ArrowTypeInfo(pa.uint16()), st.integers(0, 65535)),
    (ArrowTypeInfo(pa.list_(pa.float16())), st.lists(st.sampled_from([0.5, -2.0]), max_size=3)),
]


def nested(children: TypedStrategy) -> TypedStrategy:
    keys = st.sampled_from(sorted(KEYABLE))

    def field_rows(kind: str) -> TypedStrategy:
        def build(fields: list[tuple[TypeInformation, Strategy]]) -> Any:
            types = [t for t, _ in fields]
            if kind == "TUPLE":
                return Types.TUPLE(types), st.tuples(*(s for _, s in fields))
            return Types.ROW(types), st.tuples(*(st.none() | s for _, s in fields))

        return st.lists(children, min_size=kind == "TUPLE", max_size=4).map(build)

    return st.one_of(
        children.map(lambda c: (Types.LIST(c[0]), st.lists(c[1], max_size=3))),
        children.map(lambda c: (Types.OBJECT_ARRAY(c[0]), st.lists(st.none() | c[1], max_size=3))),
        st.tuples(keys, children).map(
            lambda kc: (
                Types.MAP(getattr(Types, kc[0])(), kc[1][0]),
                st.dictionaries(KEYABLE[kc[0]], st.none() | kc[1][1], max_size=3),
            )
        ),
        field_rows("ROW"),
        field_rows("TUPLE"),
    )


TYPED = st.recursive(st.sampled_from(LEAVES), nested, max_leaves=5)


@settings(deadline=None)  # the first Arrow IPC stream of a run is slow
@given(TYPED, st.data())
def test_round_trip(typed: tuple[TypeInformation, Strategy], data: st.DataObject) -> None:
    t, values = typed
    value = data.draw(values)
    serializer = serializer_for(t)
    raw = serializer.to_bytes(value)
    assert serializer.from_bytes(raw) == value
    assert serializer.to_bytes(serializer.from_bytes(raw)) == raw
    assert serializer.copy(value) == value
    with pytest.raises(SerializationError):
        serializer.from_bytes(raw + b"\x00")
    for cut in sorted({0, len(raw) // 2, len(raw) - 1} - {len(raw)}):
        with pytest.raises(SerializationError):
            serializer.from_bytes(raw[:cut])


@given(st.sampled_from(sorted(ATOMIC)), st.binary(max_size=40))
def test_garbage_is_a_serialization_error_or_a_value(name: str, raw: bytes) -> None:
    serializer = serializer_for(getattr(Types, name)())
    try:
        serializer.from_bytes(raw)
    except SerializationError as exc:
        assert str(exc).startswith("[SERIALIZATION] ")


@given(decimals())
def test_big_dec_keeps_scale_and_every_digit(value: decimal.Decimal) -> None:
    serializer = serializer_for(Types.BIG_DEC())
    raw = serializer.to_bytes(value)
    assert serializer.from_bytes(raw).as_tuple() == value.as_tuple()
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits))) * (-1 if sign else 1)
    size = 1  # Java's BigInteger.toByteArray: the shortest two's complement
    while not -(1 << (8 * size - 1)) <= unscaled < 1 << (8 * size - 1):
        size += 1
    assert raw[:4] == struct.pack(">i", size + 4)
    assert raw[4:-4] == unscaled.to_bytes(size, "big", signed=True)
    assert raw[-4:] == struct.pack(">i", -exponent)


def reference_string(s: str) -> bytes:
    """Flink's StringValue.writeString, written from its description."""
    units = struct.unpack(f">{len(s.encode('utf-16-be', 'surrogatepass')) // 2}H",
                          s.encode("utf-16-be", "surrogatepass"))  # fmt: skip
    out = bytearray()
    for n in (len(units) + 1, *units):
        while n >= 0x80:
            out.append(0x80 | n & 0x7F)
            n >>= 7
        out.append(n)
    return bytes(out)


@given(utf16_text())
def test_string_bytes_are_flink_string_value(s: str) -> None:
    assert serializer_for(Types.STRING()).to_bytes(s) == reference_string(s)


def test_a_surrogate_pair_reads_back_as_one_code_point() -> None:
    serializer = serializer_for(Types.STRING())
    assert serializer.from_bytes(serializer.to_bytes("\ud83d\ude00")) == "\U0001f600"


@given(st.datetimes())
def test_sql_timestamp_bytes_are_java_sql_timestamp(value: datetime.datetime) -> None:
    raw = serializer_for(Types.SQL_TIMESTAMP()).to_bytes(value)
    millis, nanos = struct.unpack(">qi", raw)
    assert millis == (value - datetime.datetime(1970, 1, 1)) // datetime.timedelta(milliseconds=1)
    assert nanos == value.microsecond * 1000  # getNanos(): the whole fraction of the second


LONG_NAN = struct.unpack(">d", b"\x7f\xf8\x00\x00\x00\x00\x00\x01")[0]
LAYOUTS: list[tuple[TypeInformation, Any, str]] = [
    (Types.STRING(), "", "01"),
    (Types.STRING(), "a", "0261"),
    (Types.STRING(), "\u00e9", "02e901"),
    (Types.STRING(), "\U0001f600", "03bdb00380bc03"),
    (Types.STRING(), "a" * 200, "c901" + "61" * 200),
    (Types.BOOLEAN(), True, "01"),
    (Types.BOOLEAN(), False, "00"),
    (Types.BYTE(), -1, "ff"),
    (Types.SHORT(), 0x1234, "1234"),
    (Types.INT(), -2, "fffffffe"),
    (Types.LONG(), 1, "0000000000000001"),
    (Types.FLOAT(), 1.0, "3f800000"),
    (Types.FLOAT(), -0.0, "80000000"),
    (Types.FLOAT(), math.inf, "7f800000"),
    (Types.FLOAT(), -math.nan, "7fc00000"),
    (Types.DOUBLE(), -math.inf, "fff0000000000000"),
    (Types.DOUBLE(), LONG_NAN, "7ff8000000000000"),
    (Types.DOUBLE(), -math.nan, "7ff8000000000000"),
    (Types.CHAR(), "A", "0041"),
    (Types.CHAR(), "\u00e9", "00e9"),
    (Types.BIG_DEC(), decimal.Decimal("1.50"), "00000006" + "0096" + "00000002"),
    (Types.BIG_DEC(), decimal.Decimal(-128), "00000005" + "80" + "00000000"),
    (Types.BIG_DEC(), decimal.Decimal("1E+5"), "00000005" + "01" + "fffffffb"),
    (Types.SQL_DATE(), datetime.date(1970, 1, 2), "0000000005265c00"),
    (Types.SQL_DATE(), datetime.date(1969, 12, 31), "fffffffffad9a400"),
    (Types.SQL_TIME(), datetime.time(0, 0, 1, 500000), "00000000000005dc"),
    (Types.SQL_TIMESTAMP(), datetime.datetime(1970, 1, 1, 0, 0, 0, 123456),
     "000000000000007b" "075bca00"),
    (Types.INSTANT(), datetime.datetime(1970, 1, 1, 0, 0, 1, 5, UTC),
     "0000000000000001" "00001388"),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), b"ab", "00000002" "6162"),
    (Types.PRIMITIVE_ARRAY(Types.SHORT()), [1, -1], "00000002" "0001" "ffff"),
    (Types.LIST(Types.INT()), [1, 2], "00000002" "00000001" "00000002"),
    (Types.BASIC_ARRAY(Types.INT()), [1, None], "00000002" "01" "00000001" "00"),
    (Types.BASIC_ARRAY(Types.STRING()), ["a", None], "00000002" "0261" "00"),
    (Types.OBJECT_ARRAY(Types.STRING()), [None, ""], "00000002" "00" "01"),
    (Types.OBJECT_ARRAY(Types.LIST(Types.BYTE())), [None, [7]],
     "00000002" "00" "01" "00000001" "07"),
    (Types.MAP(Types.STRING(), Types.INT()), {"a": 1, "b": None},
     "00000002" "0261" "00" "00000001" "0262" "01"),
    (Types.ROW([Types.INT(), Types.STRING()]), (1, None), "10" "00000001"),
    (Types.ROW([Types.INT(), Types.STRING()]), (None, "a"), "20" "0261"),
    (Types.ROW([Types.BOOLEAN()] * 7), (True,) * 6 + (None,), "0080" + "01" * 6),
    (Types.ROW([Types.BOOLEAN()] * 6), (None,) * 6, "3f"),
    (Types.ROW([]), (), "00"),
    (Types.TUPLE([Types.INT(), Types.STRING()]), (1, "a"), "00000001" "0261"),
]  # fmt: skip


@pytest.mark.parametrize(("t", "value", "hex_bytes"), LAYOUTS, ids=lambda x: str(x)[:30])
def test_flink_byte_layouts(t: TypeInformation, value: Any, hex_bytes: str) -> None:
    serializer = serializer_for(t)
    assert serializer.to_bytes(value).hex() == hex_bytes
    back = serializer.from_bytes(bytes.fromhex(hex_bytes))
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(back)
    else:
        assert back == value


@pytest.mark.parametrize(("length", "value"), [(1, 0), (2, 1), (3, 10)])
def test_big_dec_reads_flinks_short_forms(length: int, value: int) -> None:
    raw = struct.pack(">ii", length, 3)
    assert serializer_for(Types.BIG_DEC()).from_bytes(raw) == decimal.Decimal(value).scaleb(-3)


@pytest.mark.parametrize(
    ("t", "raw"),
    [
        (Types.BIG_DEC(), struct.pack(">ii", 0, 0)),  # Flink's null
        (Types.BIG_DEC(), struct.pack(">ii", 4, 0)),  # a zero-length BigInteger
        (Types.STRING(), b"\x00"),  # Flink's null string
        (Types.STRING(), b"\x02\xff\xff\x7f"),  # a "character" beyond 0xFFFF
        (Types.CHAR(), b"\x00"),
        (Types.PRIMITIVE_ARRAY(Types.BYTE()), struct.pack(">i", -1)),
        (Types.PRIMITIVE_ARRAY(Types.BYTE()), struct.pack(">i", 3) + b"ab"),
        (Types.LIST(Types.INT()), struct.pack(">i", -1)),
        (Types.MAP(Types.INT(), Types.INT()), struct.pack(">i", -5)),
        (Types.INSTANT(), struct.pack(">qi", 0, 1_000_000_000)),
        (Types.SQL_DATE(), struct.pack(">q", 2**62)),
        (Types.PICKLED_BYTE_ARRAY(), struct.pack(">i", 3) + b"abc"),
        (ArrowTypeInfo(pa.uint8()), struct.pack(">i", 3) + b"abc"),
        (Types.ROW([Types.INT()]), b""),
        (Types.LONG(), b""),
    ],
    ids=lambda x: str(x)[:30],
)
def test_malformed_bytes_are_serialization_errors(t: TypeInformation, raw: bytes) -> None:
    with pytest.raises(SerializationError) as info:
        serializer_for(t).from_bytes(raw)
    assert str(info.value).startswith("[SERIALIZATION] ")


@pytest.mark.parametrize(
    "t", [Types.LIST(Types.ROW([])), Types.MAP(Types.INT(), Types.TUPLE([Types.ROW([])]))], ids=str
)
def test_sizes_beyond_the_input_fail_before_reading(t: TypeInformation) -> None:
    with pytest.raises(SerializationError, match="cannot fit"):
        serializer_for(t).from_bytes(struct.pack(">i", 1000))


BAD_VALUES: list[tuple[TypeInformation, Any]] = [
    *((Types.LONG(), v) for v in ("1", True, 2**63, -(2**63) - 1, None, 1.0)),
    (Types.INT(), 2**31),
    (Types.SHORT(), -32769),
    (Types.BYTE(), 128),
    *((Types.FLOAT(), v) for v in ("1", True, 1e39, None)),
    (Types.DOUBLE(), decimal.Decimal(1)),
    *((Types.BOOLEAN(), v) for v in (1, None, "true")),
    *((Types.CHAR(), v) for v in ("ab", "", "\U0001f600", 65)),
    *((Types.STRING(), v) for v in (None, 1, b"a")),
    *((Types.BIG_DEC(), v) for v in ("1.5", 1.5, decimal.Decimal("NaN"), decimal.Decimal("-Inf"))),
    (Types.SQL_DATE(), datetime.datetime(2020, 1, 1)),
    (Types.SQL_DATE(), "2020-01-01"),
    (Types.SQL_TIME(), datetime.datetime(2020, 1, 1)),
    (Types.SQL_TIMESTAMP(), datetime.date(2020, 1, 1)),
    (Types.INSTANT(), datetime.datetime(2020, 1, 1)),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), "ab"),
    (Types.PRIMITIVE_ARRAY(Types.INT()), [1, None]),
    *((Types.LIST(Types.STRING()), v) for v in ("abc", {"a"}, {"a": 1}, None, [None])),
    (Types.MAP(Types.STRING(), Types.LONG()), [("a", 1)]),
    (Types.MAP(Types.STRING(), Types.LONG()), {None: 1}),
    (Types.ROW([Types.LONG()]), (1, 2)),
    (Types.ROW([Types.STRING()]), "a"),
    (Types.ROW([Types.STRING()]), {"f0": "a"}),
    (Types.TUPLE([Types.LONG()]), (None,)),
    (Types.PICKLED_BYTE_ARRAY(), threading.Lock()),
    (Types.PICKLED_BYTE_ARRAY(), lambda: 1),
    (ArrowTypeInfo(pa.uint8()), 300),
    (ArrowTypeInfo(pa.uint8()), "x"),
]


@pytest.mark.parametrize(("t", "value"), BAD_VALUES, ids=lambda x: repr(x)[:30])
def test_bad_values_are_serialization_errors(t: TypeInformation, value: Any) -> None:
    with pytest.raises(SerializationError) as info:
        serializer_for(t).to_bytes(value)
    assert info.value.code == "SERIALIZATION"
    assert str(info.value).startswith("[SERIALIZATION] ")


def test_nan_keys_have_one_canonical_encoding() -> None:
    payload_nan = struct.unpack(">f", b"\xff\xc0\x00\x01")[0]
    encodings = {serializer_for(Types.FLOAT()).to_bytes(v) for v in (math.nan, -math.nan, payload_nan)}
    assert encodings == {b"\x7f\xc0\x00\x00"}
    assert math.isnan(serializer_for(Types.DOUBLE()).from_bytes(b"\xff\xf8" + bytes(6)))


def test_sql_timestamp_takes_aware_datetimes_as_utc() -> None:
    serializer = serializer_for(Types.SQL_TIMESTAMP())
    aware = datetime.datetime(2020, 1, 1, 2, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    assert serializer.from_bytes(serializer.to_bytes(aware)) == datetime.datetime(2020, 1, 1)


IMMUTABLE = [
    (Types.STRING(), "s"),
    (Types.LONG(), 10**12),
    (Types.BIG_DEC(), decimal.Decimal("1.5")),
    (Types.INSTANT(), datetime.datetime(2020, 1, 1, tzinfo=UTC)),
    (Types.PRIMITIVE_ARRAY(Types.BYTE()), b"xyz"),
    (Types.ROW([Types.LONG(), Types.STRING()]), (1, None)),
    (Types.TUPLE([Types.SQL_DATE()]), (datetime.date(2020, 1, 1),)),
]
MUTABLE = [
    (Types.LIST(Types.LIST(Types.LONG())), [[1], [2, 3]]),
    (Types.PRIMITIVE_ARRAY(Types.INT()), [1, 2]),
    (Types.BASIC_ARRAY(Types.STRING()), ["a", None]),
    (Types.OBJECT_ARRAY(Types.LIST(Types.LONG())), [None, [1]]),
    (Types.MAP(Types.STRING(), Types.LIST(Types.LONG())), {"a": [1], "b": None}),
    (Types.MAP(Types.STRING(), Types.LONG()), {"a": 1}),
    (Types.ROW([Types.LIST(Types.LONG()), Types.LONG()]), ([1], None)),
    (Types.TUPLE([Types.MAP(Types.LONG(), Types.LONG())]), ({1: 2},)),
    (Types.PICKLED_BYTE_ARRAY(), {"k": [1, {2}]}),
    (ArrowTypeInfo(pa.list_(pa.uint8())), [1, 2]),
]


@pytest.mark.parametrize(("t", "value"), IMMUTABLE, ids=lambda x: str(x)[:30])
def test_immutable_values_are_not_copied(t: TypeInformation, value: Any) -> None:
    serializer = serializer_for(t)
    assert serializer.immutable
    assert serializer.copy(value) is value


def _mutate(value: Any) -> None:
    """Change something inside ``value`` (its first mutable container)."""
    if isinstance(value, list):
        value.append(value[-1])
    elif isinstance(value, dict):
        value.clear()
    else:
        _mutate(value[0])


@pytest.mark.parametrize(("t", "value"), MUTABLE, ids=lambda x: str(x)[:30])
def test_mutable_values_are_deep_copied(t: TypeInformation, value: Any) -> None:
    serializer = serializer_for(t)
    assert not serializer.immutable
    before = serializer.to_bytes(value)
    copied = serializer.copy(value)
    assert copied == value
    assert copied is not value
    _mutate(copied)
    if isinstance(copied, list) and copied and isinstance(copied[-1], list):
        copied[-1].append(99)  # an inner list too: the copy must be deep
    assert serializer.to_bytes(value) == before


def test_serializers_are_cached_per_type() -> None:
    t = Types.MAP(Types.STRING(), Types.LIST(Types.ROW([Types.LONG()])))
    same = Types.MAP(Types.STRING(), Types.LIST(Types.ROW([Types.LONG()])))
    assert serializer_for(t) is serializer_for(same)


def test_serializer_for_a_non_type_is_a_serialization_error() -> None:
    with pytest.raises(SerializationError):
        serializer_for(object())
