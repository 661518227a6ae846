"""The C key-group decoder (``_keyed_columns``) against the general Python decoder, its model:
every atomic key and value type, random and hostile values (unicode, NUL, lone surrogates,
non-canonical varints, nulls), truncated blocks, and the real fixtures of Flink 2.3/1.20/1.17
read with the accelerator on and off."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pyarrow as pa
import pytest
from flink_model import CANONICAL, VERSIONS, fixture

from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.checkpoint.flink.reader.tables import keyed_table
from flinkstate.checkpoint.flink.streams import keyed_columns_read
from flinkstate.checkpoint.flink.streams.header_read import KeyedHeader, StateInfo
from flinkstate.checkpoint.flink.streams.keyed_columns_read import NativePlan
from flinkstate.checkpoint.flink.streams.keyed_read import KeyGroupDecoder
from flinkstate.checkpoint.flink.types import classes
from flinkstate.checkpoint.flink.types.flink_type import FlinkType
from flinkstate.state.errors import FlinkStateError
from flinkstate.state.serializers.lookup import serializer_for
from flinkstate.state.types.mapping import Types

pytestmark = pytest.mark.skipif(keyed_columns_read._native is None, reason="built without a C compiler")

TYPES = {
    "LONG": Types.LONG(),
    "INT": Types.INT(),
    "SHORT": Types.SHORT(),
    "BYTE": Types.BYTE(),
    "BOOLEAN": Types.BOOLEAN(),
    "DOUBLE": Types.DOUBLE(),
    "FLOAT": Types.FLOAT(),
    "CHAR": Types.CHAR(),
    "STRING": Types.STRING(),
    "BYTES": Types.PRIMITIVE_ARRAY(Types.BYTE()),
}
VOID = FlinkType(classes.VOID, None, None, fixed_width=True)
ASTRAL = "\U0001f600\U00010000\U0010ffff"
TEXT = ["", "\x00", "a\x00b", "caf\u00e9", "\u6f22\u5b57", ASTRAL, "x" * 200, "\u00e9" * 70, "\uffff\u0800\u07ff"]


def _flink_type(name: str) -> FlinkType:
    t = TYPES[name]
    return FlinkType(name, t, serializer_for(t), fixed_width=name not in ("STRING", "BYTES"))


def _header(key: str, value: str, states: int = 3) -> KeyedHeader:
    v = _flink_type(value)
    infos = tuple(StateInfo(i, f"s{i}", "VALUE", VOID, v, None, v) for i in range(states))
    return KeyedHeader(6, False, _flink_type(key), infos, 0)


def _random(name: str, rng: random.Random) -> Any:
    bits = {"LONG": 64, "INT": 32, "SHORT": 16, "BYTE": 8}
    if name in bits:
        b = bits[name]
        return rng.choice([-(1 << (b - 1)), (1 << (b - 1)) - 1, 0, -1, rng.randrange(-(1 << (b - 1)), 1 << (b - 1))])
    if name == "BOOLEAN":
        return rng.random() < 0.5
    if name in ("DOUBLE", "FLOAT"):
        x = rng.choice([math.inf, -math.inf, math.nan, -0.0, 5e-324, rng.uniform(-1e30, 1e30)])
        return struct.unpack(">f", struct.pack(">f", x))[0] if name == "FLOAT" and math.isfinite(x) else x
    if name == "CHAR":
        return rng.choice(["\x00", "a", "\u00e9", "\u6f22", "\uffff", chr(rng.randrange(0xE000, 0x10000))])
    if name == "STRING":
        return rng.choice([*TEXT, "".join(chr(rng.randrange(0x20, 0x7F)) for _ in range(rng.randrange(50)))])
    return rng.randbytes(rng.randrange(0, 40))


def _entry(key_raw: bytes, value_raw: bytes) -> bytes:
    return struct.pack(">i", len(key_raw)) + key_raw + struct.pack(">i", len(value_raw)) + value_raw


def _block(kg: int, prefix: int, runs: list[tuple[int, list[tuple[bytes, bytes]]]]) -> bytes:
    """A canonical block of (state id, [(key bytes after the prefix, value bytes)]) runs."""
    out = bytearray()
    for state_id, entries in runs:
        out += struct.pack(">H", state_id)
        for i, (key, value) in enumerate(entries):
            head = bytearray(kg.to_bytes(prefix, "big"))
            if i == len(entries) - 1:
                head[0] |= 0x80
            out += _entry(bytes(head) + key, value)
    return bytes(out + struct.pack(">H", 0xFFFF))


def _values_block(key: str, value: str, kg: int, prefix: int, pairs: list[tuple[Any, Any]]) -> bytes:
    ks, vs = serializer_for(TYPES[key]), serializer_for(TYPES[value])
    wanted = [(ks.to_bytes(k) + b"\x00", vs.to_bytes(v)) for k, v in pairs]
    other = [(ks.to_bytes(k) + b"\x00", b"\xff" * 3) for k, _ in pairs[:2]]  # another state, skipped
    return _block(kg, prefix, [(0, other), (1, wanted), (2, other)] if other else [(1, wanted)])


def _decode(header: KeyedHeader, buf: bytes, kg: int, native: bool, max_p: int = 128) -> pa.Table:
    decoder = KeyGroupDecoder(header, max_p, "test", ["s1"])
    decoder.columnar = None  # only the C path makes chunks
    if not native:
        decoder.native = None
    decoder.canonical(buf, 0, kg)
    rows = decoder.rows[1]
    assert bool(rows.chunks) == native, "the C path did not take a block it should"
    return keyed_table(rows, header.key)


def _plain(table: pa.Table) -> list[dict[str, Any]]:
    def norm(v: Any) -> Any:
        return "NaN" if isinstance(v, float) and math.isnan(v) else v

    return [{k: norm(v) for k, v in r.items()} for r in table.to_pylist()]


def _same(header: KeyedHeader, buf: bytes, kg: int, max_p: int = 128) -> None:
    c, python = _decode(header, buf, kg, True, max_p), _decode(header, buf, kg, False, max_p)
    assert c.schema == python.schema
    assert _plain(c) == _plain(python)


@pytest.mark.parametrize("key", list(TYPES))
@pytest.mark.parametrize("value", list(TYPES))
def test_every_atomic_key_and_value_type_decodes_as_the_python_path(key: str, value: str) -> None:
    rng = random.Random(f"{key}-{value}")
    for prefix, max_p, kg in ((1, 128, 77), (2, 32768, 300)):
        pairs = [(_random(key, rng), _random(value, rng)) for _ in range(rng.randrange(1, 60))]
        _same(_header(key, value), _values_block(key, value, kg, prefix, pairs), kg, max_p)


def test_empty_run_and_wanted_state_absent() -> None:
    header = _header("LONG", "STRING")
    block = _block(5, 1, [(0, [(struct.pack(">q", 1) + b"\x00", b"\x02a")])])
    c = _decode(header, block, 5, True)
    assert c.num_rows == 0 and c.equals(_decode(header, block, 5, False))


def _string_value(raw: bytes) -> bytes:
    """A block of one LONG -> STRING entry whose value bytes are ``raw``."""
    return _block(9, 1, [(1, [(struct.pack(">q", 42) + b"\x00", raw)])])


def _units(*units: int) -> bytes:
    """StringValue bytes of these UTF-16 units (length + 1, then each unit as a varint)."""
    out = bytearray()
    for n in (len(units) + 1, *units):
        while n >= 0x80:
            out.append(n & 0x7F | 0x80)
            n >>= 7
        out.append(n)
    return bytes(out)


@pytest.mark.parametrize(
    "raw",
    [
        _units(0xD83D, 0xDE00),  # a surrogate pair: one astral code point
        _units(0x61, 0),  # NUL
        b"\x03\xe1\x00\x62",  # 'a' as a two-byte varint (non-canonical), then 'b'
        b"\x81\x00",  # the empty string's length as a two-byte varint
        _units(*range(0x7F, 0x7F + 130)),  # a two-byte length and two-byte units
    ],
)
def test_strings_flink_can_write_decode_alike(raw: bytes) -> None:
    header = _header("LONG", "STRING")
    _same(header, _string_value(raw), 9)


@pytest.mark.parametrize(
    "raw",
    [
        _units(0xD83D),  # a lone high surrogate at the end
        _units(0xD83D, 0x41),  # a high surrogate before a non-surrogate
        _units(0xDE00, 0xD83D),  # a low one first
        b"\x00",  # null where a value is required
        b"\x02\x80\x80\x04",  # a unit past 0xFFFF
        b"\x05ab",  # shorter than its length
        b"\x02ab",  # trailing bytes after the string
        b"\x80\x80\x80\x80\x80\x01",  # an over-long length varint
        b"",  # no bytes at all
    ],
)
def test_hostile_strings_give_the_python_paths_error(raw: bytes) -> None:
    header = _header("LONG", "STRING")
    buf = _string_value(raw)
    assert keyed_columns_read.native_columns(buf, 0, 9, 1, 3, 1, NativePlan(1, 9)) is None
    with pytest.raises(FlinkStateError) as c:
        _table_or_error(header, buf, 9, True)
    with pytest.raises(FlinkStateError) as python:
        _table_or_error(header, buf, 9, False)
    assert type(c.value) is type(python.value) and str(c.value) == str(python.value)


def _table_or_error(header: KeyedHeader, buf: bytes, kg: int, native: bool) -> pa.Table:
    decoder = KeyGroupDecoder(header, 128, "test", ["s1"])
    if not native:
        decoder.native = decoder.columnar = None
    decoder.canonical(buf, 0, kg)
    return keyed_table(decoder.rows[1], header.key)


def _outcome(header: KeyedHeader, buf: bytes, kg: int, native: bool) -> Any:
    try:
        return _plain(_table_or_error(header, buf, kg, native))
    except FlinkStateError as exc:
        return type(exc), str(exc)


@pytest.mark.parametrize(
    ("key", "value"), [("LONG", "STRING"), ("STRING", "BYTES"), ("INT", "DOUBLE"), ("CHAR", "BOOLEAN")]
)
def test_every_truncation_and_corruption_alike(key: str, value: str) -> None:
    """Cut short at every byte, or one byte changed: rows or typed error as the Python path."""
    rng = random.Random(key + value)
    header = _header(key, value)
    pairs = [(_random(key, rng), _random(value, rng)) for _ in range(6)]
    block = _values_block(key, value, 12, 1, pairs)
    for end in range(len(block)):
        cut = block[:end]
        assert _outcome(header, cut, 12, True) == _outcome(header, cut, 12, False), end
    for at in range(len(block)):
        bad = bytearray(block)
        bad[at] ^= rng.choice([0x01, 0x80, 0xFF])
        assert _outcome(header, bytes(bad), 12, True) == _outcome(header, bytes(bad), 12, False), at


@pytest.mark.parametrize(
    "block",
    [
        _block(3, 1, [(3, [(struct.pack(">q", 1) + b"\x00", b"\x02a")])]),  # unknown state id
        _block(4, 1, [(1, [(struct.pack(">q", 1) + b"\x00", b"\x02a")])]),  # another key group's prefix
        _block(3, 1, [(1, [(struct.pack(">q", 1), b"\x02a")])]),  # no namespace byte
        _block(3, 1, [(1, [(struct.pack(">i", 1) + b"\x00", b"\x02a")])]),  # a short key
        _block(3, 1, [(1, [(struct.pack(">q", 1) + b"\x00\x00", b"\x02a")])]),  # trailing key bytes
        _block(3, 1, [(1, [(b"", b"\x02a")])]),  # the prefix alone
    ],
)
def test_malformed_entries_are_left_to_the_python_path(block: bytes) -> None:
    assert keyed_columns_read.native_columns(block, 0, 3, 1, 3, 1, NativePlan(1, 9)) is None
    header = _header("LONG", "STRING")
    assert _outcome(header, block, 3, True) == _outcome(header, block, 3, False)


ATOMIC_STATES = ["v_long", "v_int", "v_short", "v_byte", "v_bool", "v_double", "v_float", "v_char"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", CANONICAL)
def test_fixtures_read_alike_with_the_accelerator_on_and_off(
    version: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    states = [*ATOMIC_STATES, "v_string", "v_bytes", "r_sum"]
    path = str(fixture(version, kind))
    taken = []
    native = keyed_columns_read.native_columns

    def counting(*args: Any) -> Any:
        found = native(*args)
        taken.append(found is not None)
        return found

    monkeypatch.setattr("flinkstate.checkpoint.flink.streams.keyed_read.native_columns", counting)
    on = {s: read_savepoint(path).keyed_state("keyed-states", s) for s in states}
    assert taken and all(taken)
    monkeypatch.setattr(keyed_columns_read, "_native", None)
    for state in states:
        off = read_savepoint(path).keyed_state("keyed-states", state)
        assert on[state].schema == off.schema
        assert _plain(on[state].sort_by("key")) == _plain(off.sort_by("key")), state
