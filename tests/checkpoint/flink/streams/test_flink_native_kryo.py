"""Kryo values read as declared structs by the C key-group decoder, against the general
decoder (KryoReader, itself checked against kryo_model): every field encoding, nullable and
not, Kryo 2 and 5, registered and named classes, unicode and hostile bytes, and the real
fixtures read with the accelerator on and off."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from block_model import block, count_native, decode, header, outcome, plain
from flink_model import CANONICAL, FIELDS_DDL, VERSIONS, fixture, told
from kryo_model import encode, string, uvarint
from sql_model import RICH_DDL

from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.checkpoint.flink.errors import FlinkVersionRequiredError
from flinkstate.checkpoint.flink.streams import keyed_columns_read
from flinkstate.checkpoint.flink.streams.header_read import KeyedHeader
from flinkstate.checkpoint.flink.types import classes
from flinkstate.checkpoint.flink.types.declared_read import parse_type
from flinkstate.checkpoint.flink.types.flink_type import FlinkType
from flinkstate.checkpoint.flink.types.kryo_read import KryoReader
from flinkstate.state.serializers.lookup import serializer_for
from flinkstate.state.types.mapping import Types
from flinkstate.state.types.typeinfo import ArrowTypeInfo

pytestmark = pytest.mark.skipif(keyed_columns_read._native is None, reason="built without a C compiler")

DDL = (
    "STRUCT<a: BIGINT NOT NULL, b: INT NOT NULL, c: SMALLINT NOT NULL, d: TINYINT NOT NULL, "
    "e: BOOLEAN NOT NULL, f: FLOAT NOT NULL, g: DOUBLE NOT NULL, h: STRING, i: BIGINT, j: INT, "
    "k: SMALLINT, l: TINYINT, m: BOOLEAN, n: FLOAT, o: DOUBLE, p: STRING, q: CHAR NOT NULL, r: CHAR>"
)
T = parse_type(DDL)
LONG = FlinkType("LONG", Types.LONG(), serializer_for(Types.LONG()), fixed_width=True)
TEXTS = [None, "", "a", "ab", "x" * 40, "\u00e9\u6f22\U0001f600", "\x00nul", "y" * 70, "\u20ac" * 30]
CHARS = ["\x00", "a", "\x7f", "\x80", "\u00e9", "\u07ff", "\u0800", "\u6f22", "\ud7ff", "\ue000", "\uffff"]


def _header(kryo: int, java_class: str = "x.Y") -> KeyedHeader:
    """A fresh header (a KryoReader keeps the class id of the first value it reads)."""
    reader = KryoReader(T, java_class, "state s1", kryo)
    return header(LONG, FlinkType(classes.KRYO, ArrowTypeInfo(T), reader, java_class=java_class))


def _value(rng: random.Random) -> dict[str, Any]:
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.3 else v

    f32 = struct.unpack("<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0]
    return {
        "a": rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randint(-(2**63), 2**63 - 1)]),
        "b": rng.choice([0, -1, 2**31 - 1, -(2**31), rng.randint(-(2**31), 2**31 - 1)]),
        "c": rng.randint(-(2**15), 2**15 - 1),
        "d": rng.randint(-128, 127),
        "e": rng.random() < 0.5,
        "f": f32,
        "g": rng.choice([float("inf"), float("nan"), -0.0, rng.uniform(-1e300, 1e300)]),
        "h": rng.choice(TEXTS),
        "i": maybe(rng.randint(-(2**63), 2**63 - 1)),
        "j": maybe(rng.randint(-(2**31), 2**31 - 1)),
        "k": maybe(rng.randint(-(2**15), 2**15 - 1)),
        "l": maybe(rng.randint(-128, 127)),
        "m": maybe(rng.random() < 0.5),
        "n": maybe(f32),
        "o": maybe(rng.random()),
        "p": rng.choice(TEXTS),
        "q": rng.choice(CHARS),
        "r": maybe(rng.choice(CHARS)),
    }


def _named(raw: bytes, java_class: str = "x.Y") -> bytes:
    """A registered class's bytes (one-byte class id) rewritten as an unregistered class's."""
    return b"\x01" + uvarint(3, 5) + string(java_class) + raw[1:]


def _kryo_block(values: list[bytes], kg: int = 7) -> bytes:
    keys = [struct.pack(">q", i * 7919 - 10**6) + b"\x00" for i in range(len(values))]
    other = [(keys[0], b"\xff")]  # another state's entry, skipped
    return block(kg, 1, [(0, other), (1, list(zip(keys, values, strict=True))), (2, other)])


def _same(kryo: int, buf: bytes, kg: int = 7) -> None:
    c_header, python_header = _header(kryo), _header(kryo)
    c, python = decode(c_header, buf, kg, True), decode(python_header, buf, kg, False)
    assert c.schema == python.schema
    assert plain(c) == plain(python)
    assert c_header.states[1].value.serializer.class_id == python_header.states[1].value.serializer.class_id


@pytest.mark.parametrize("kryo", [2, 5])
def test_random_values_decode_as_the_python_path(kryo: int) -> None:
    rng = random.Random(kryo)
    for _ in range(20):
        values = [encode(T, _value(rng), kryo=kryo) for _ in range(rng.randrange(1, 40))]
        _same(kryo, _kryo_block(values))


@pytest.mark.parametrize("kryo", [2, 5])
def test_named_classes_decode_as_the_python_path(kryo: int) -> None:
    rng = random.Random(kryo + 10)
    values = [encode(T, _value(rng), kryo=kryo) for _ in range(10)]
    _same(kryo, _kryo_block([_named(v) if i % 2 else v for i, v in enumerate(values)]))


def _hostile() -> list[bytes]:
    rng = random.Random(3)
    good = encode(T, _value(rng))
    lone = _value(rng)
    lone["h"] = "a\ud83d"
    plain_char = {**_value(rng), "q": "a", "r": None}
    raw = encode(T, plain_char)
    assert raw[-3:] == b"a\x00\x00"  # q's UTF-16 unit (Kryo 5: little-endian), then r's null marker
    half = raw[:-3] + b"\x3d\xd8\x00"  # q a surrogate half, which no string holds
    marker = good.index(b"\x01", 9)  # the first marker after the fixed-width fields
    return [
        b"\x00",  # a null object
        encode(T, _value(rng), class_id=9),  # another class id than the first value's
        _named(good, "x.Z"),  # another class's name
        good[:1] + b"\x02" + good[2:],  # a back reference
        good[:marker] + b"\x02" + good[marker + 1 :],  # a back reference for a field
        encode(T, lone),  # a lone surrogate
        half,
        good[:-1],  # truncated
        good + b"\x00",  # a byte left over
    ]


@pytest.mark.parametrize("bad", _hostile())
def test_hostile_values_give_the_python_paths_outcome(bad: bytes) -> None:
    rng = random.Random(4)
    buf = _kryo_block([encode(T, _value(rng)), bad])
    got = outcome(_header(5), buf, 7, True)
    assert got == outcome(_header(5), buf, 7, False)
    plan = keyed_columns_read.native_plan(_header(5).states[1], LONG)
    assert plan is not None and keyed_columns_read.native_columns(buf, 0, 7, 1, 3, 1, plan) is None


def test_every_truncation_and_byte_flip_alike() -> None:
    rng = random.Random(5)
    buf = _kryo_block([encode(T, _value(rng)) for _ in range(3)])
    for end in range(len(buf)):
        assert outcome(_header(5), buf[:end], 7, True) == outcome(_header(5), buf[:end], 7, False), end
    for at in range(len(buf)):
        bad = bytearray(buf)
        bad[at] ^= rng.choice([0x01, 0x40, 0x80, 0xFF])
        assert outcome(_header(5), bytes(bad), 7, True) == outcome(_header(5), bytes(bad), 7, False), at


def test_an_unknown_kryo_version_is_left_to_the_python_path() -> None:
    """The version is asked when the first value is read: the general path raises it there."""

    def unknown() -> int:
        raise FlinkVersionRequiredError("the Kryo version of state s1")

    def make() -> KeyedHeader:
        reader = KryoReader(T, "x.Y", "state s1", unknown)
        return header(LONG, FlinkType(classes.KRYO, ArrowTypeInfo(T), reader, java_class="x.Y"))

    buf = _kryo_block([encode(T, _value(random.Random(6)))])
    plan = keyed_columns_read.native_plan(make().states[1], LONG)
    assert plan is not None and keyed_columns_read.native_columns(buf, 0, 7, 1, 3, 1, plan) is None
    got = outcome(make(), buf, 7, True)
    assert got == outcome(make(), buf, 7, False) and "[FLINK_VERSION_REQUIRED]" in got[1]
    empty = block(7, 1, [(0, [(struct.pack(">q", 1) + b"\x00", b"\xff")])])
    assert outcome(make(), empty, 7, True) == outcome(make(), empty, 7, False) == []


def _fixture_states(version: str) -> dict[str, str]:
    """Kryo states of FixtureJob and SqlJob with their declarations."""
    states = {"v_kryo": "STRUCT<value: BIGINT NOT NULL>"}
    return states if version == "2.3" else {**states, "v_kryo_fields": FIELDS_DDL}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", [*CANONICAL, "sql_heap", "sql_rocksdb"])
def test_fixtures_read_alike_with_the_accelerator_on_and_off(
    version: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    operator, states = (
        ("kryo-states", {"k_rich": RICH_DDL})
        if kind.startswith("sql")
        else ("keyed-states", _fixture_states(version))
    )
    path = str(fixture(version, kind))
    taken = count_native(monkeypatch)
    on = {
        s: read_savepoint(path, types={s: t}, **told(version)).keyed_state(operator, s)
        for s, t in states.items()
    }
    assert taken and all(taken)
    monkeypatch.setattr(keyed_columns_read, "_native", None)
    for s, t in states.items():
        off = read_savepoint(path, types={s: t}, **told(version)).keyed_state(operator, s)
        assert on[s].schema == off.schema
        assert plain(on[s].sort_by("key")) == plain(off.sort_by("key")), s
