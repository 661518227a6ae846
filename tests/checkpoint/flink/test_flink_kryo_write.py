"""The Kryo encoder (:mod:`flinkstate.checkpoint.flink.kryo_write`): byte for byte what Flink
wrote, the reader's inverse on random values, and Kryo states set from rows."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from flink_model import FIXTURES
from kryo_model import encode, uvarint
from sql_model import RICH_DDL

from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.checkpoint.flink.declared import parse_type
from flinkstate.checkpoint.flink.errors import UnsupportedFlinkWriteError
from flinkstate.checkpoint.flink.kryo_write import KryoWriter, state_class_header

OPAQUE = "STRUCT<value: BIGINT NOT NULL>"  # FixtureJob's Kryo class, declared
KRYO_STATES = [
    (fixture, "keyed-states", "v_kryo", OPAQUE, "FixtureJob$Opaque")
    for fixture in ("heap_canonical", "heap_snappy", "rocksdb_canonical", "rocksdb_native")
] + [(fixture, "kryo-states", "k_rich", RICH_DDL, "SqlJob$Rich") for fixture in ("sql_heap", "sql_rocksdb")]


@pytest.mark.parametrize(("fixture", "op", "state", "ddl", "java_class"), KRYO_STATES)
def test_encode_of_decode_is_the_bytes_flink_wrote(
    fixture: str, op: str, state: str, ddl: str, java_class: str
) -> None:
    sp = read_savepoint(str(FIXTURES / fixture), types={state: ddl})
    values = [v for rows in sp.raw_keyed(op, state) for v in rows.value]
    assert len(values) >= 10
    header = state_class_header(values, "VALUE", False, java_class, state)
    writer = KryoWriter(parse_type(ddl), java_class, header, state)
    for v in values:
        assert writer.to_bytes(writer.from_bytes(v)) == v


RANDOM = pa.struct(
    [
        pa.field("l", pa.int64(), nullable=False),
        pa.field("i", pa.int32(), nullable=False),
        pa.field("s", pa.int16(), nullable=False),
        pa.field("b", pa.int8(), nullable=False),
        pa.field("z", pa.bool_(), nullable=False),
        pa.field("d", pa.float64(), nullable=False),
        pa.field("f", pa.float32(), nullable=True),
        pa.field("boxed", pa.int64(), nullable=True),
        pa.field("text", pa.string()),
        pa.field("Upper", pa.int32(), nullable=True),  # sorts before the lower-case names
    ]
)
_CHARS = "aZ09 ~é߿ࠀ€中\U0001f600\U00010000\U0010ffff"


def _random_value(rng: random.Random) -> dict[str, object]:
    def maybe(v: object) -> object:
        return None if rng.random() < 0.3 else v

    n = rng.choice([0, 1, 2, 31, 32, 33, 62, 63, 64, 200])
    text = "".join(rng.choice(_CHARS) for _ in range(n))
    if rng.random() < 0.3:
        text = "".join(rng.choice("abcXYZ 019~") for _ in range(n))
    return {
        "l": rng.choice([-(2**63), 2**63 - 1, 0, -1, rng.randint(-(2**63), 2**63 - 1)]),
        "i": rng.choice([-(2**31), 2**31 - 1, 0, -1, rng.randint(-(2**31), 2**31 - 1)]),
        "s": rng.choice([-(2**15), 2**15 - 1, 0]),
        "b": rng.choice([-128, 127, 0]),
        "z": rng.random() < 0.5,
        "d": rng.choice([0.0, -0.0, 1.5, -1e308, 5e-324]),
        "f": maybe(rng.choice([0.0, 1.5, -2.25, 3.4028234663852886e38])),
        "boxed": maybe(rng.choice([-(2**63), 2**63 - 1, 7])),
        "text": maybe(text),
        "Upper": maybe(rng.randint(-(2**31), 2**31 - 1)),
    }


def test_decode_of_encode_is_the_value_and_the_bytes_are_the_models() -> None:
    rng = random.Random(23)
    writer = KryoWriter(RANDOM, "a.B", uvarint(85 + 2, 5), "random")
    for _ in range(500):
        value = _random_value(rng)
        data = writer.to_bytes(value)
        assert writer.from_bytes(data) == value
        assert data == encode(RANDOM, value)  # the tests' second implementation of Kryo's rules
    assert writer.to_bytes(None) == b"\x00" == encode(RANDOM, None)


def test_a_nul_char_is_one_byte_as_kryo_writes_it() -> None:
    writer = KryoWriter(pa.struct([pa.field("t", pa.string())]), "a.B", b"\x03", "nul")
    for text in ["\x00", "\x00a", "\x00é", "x" * 40 + "\x00"]:
        data = writer.to_bytes({"t": text})
        assert writer.from_bytes(data) == {"t": text}
        assert b"\xc0\x80" not in data and data.count(0) == text.count("\x00")


@pytest.mark.parametrize(
    "bad",
    [
        {"l": 2**63},
        {"i": 2**31},
        {"s": 2**15},
        {"b": 128},
        {"z": 1},
        {"f": 1e39},
        {"l": None},
        {"text": b"x"},
    ],
)
def test_values_that_do_not_fit_are_refused(bad: dict[str, object]) -> None:
    from flinkstate.state.errors import SerializationError

    writer = KryoWriter(RANDOM, "a.B", b"\x57", "random")
    value = {**_random_value(random.Random(1)), **bad}
    with pytest.raises(SerializationError):
        writer.to_bytes(value)
    with pytest.raises(SerializationError, match="lacks field"):
        writer.to_bytes({"l": 1})


def test_a_class_header_no_value_carries_is_refused() -> None:
    with pytest.raises(UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\] v: .*a.B.*no value"):
        state_class_header([b"\x00"], "VALUE", False, "a.B", "v")
    two = [encode(RANDOM, _random_value(random.Random(2)), c) for c in (85, 86)]
    with pytest.raises(UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\] v: .*2 classes"):
        state_class_header(two, "VALUE", False, "a.B", "v")
