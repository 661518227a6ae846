"""The C key-group decoder (``_keyed_columns``) against the general Python decoder, its model:
every atomic key and value type, random and hostile values (unicode, NUL, lone surrogates,
non-canonical varints, nulls), truncated blocks, and the real fixtures of Flink 2.3/1.20/1.17
read with the accelerator on and off."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest
from block_model import block, count_native, decode, header, outcome, plain, same
from flink_model import CANONICAL, VERSIONS, fixture

from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.checkpoint.flink.streams import keyed_columns_read
from flinkstate.checkpoint.flink.streams.header_read import KeyedHeader
from flinkstate.checkpoint.flink.streams.keyed_columns_read import NativePlan
from flinkstate.checkpoint.flink.types.flink_type import FlinkType
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
ASTRAL = "\U0001f600\U00010000\U0010ffff"
TEXT = [
    "",
    "\x00",
    "a\x00b",
    "caf\u00e9",
    "\u6f22\u5b57",
    ASTRAL,
    "x" * 200,
    "\u00e9" * 70,
    "\uffff\u0800\u07ff",
]


def _flink_type(name: str) -> FlinkType:
    t = TYPES[name]
    return FlinkType(name, t, serializer_for(t), fixed_width=name not in ("STRING", "BYTES"))


def _header(key: str, value: str) -> KeyedHeader:
    return header(_flink_type(key), _flink_type(value))


def _random(name: str, rng: random.Random) -> Any:
    bits = {"LONG": 64, "INT": 32, "SHORT": 16, "BYTE": 8}
    if name in bits:
        b = bits[name]
        return rng.choice(
            [-(1 << (b - 1)), (1 << (b - 1)) - 1, 0, -1, rng.randrange(-(1 << (b - 1)), 1 << (b - 1))]
        )
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


def _values_block(key: str, value: str, kg: int, prefix: int, pairs: list[tuple[Any, Any]]) -> bytes:
    ks, vs = serializer_for(TYPES[key]), serializer_for(TYPES[value])
    wanted = [(ks.to_bytes(k) + b"\x00", vs.to_bytes(v)) for k, v in pairs]
    other = [(ks.to_bytes(k) + b"\x00", b"\xff" * 3) for k, _ in pairs[:2]]  # another state, skipped
    return block(kg, prefix, [(0, other), (1, wanted), (2, other)] if other else [(1, wanted)])


@pytest.mark.parametrize("key", list(TYPES))
@pytest.mark.parametrize("value", list(TYPES))
def test_every_atomic_key_and_value_type_decodes_as_the_python_path(key: str, value: str) -> None:
    rng = random.Random(f"{key}-{value}")
    for prefix, max_p, kg in ((1, 128, 77), (2, 32768, 300)):
        pairs = [(_random(key, rng), _random(value, rng)) for _ in range(rng.randrange(1, 60))]
        same(_header(key, value), _values_block(key, value, kg, prefix, pairs), kg, max_p)


def test_empty_run_and_wanted_state_absent() -> None:
    h = _header("LONG", "STRING")
    buf = block(5, 1, [(0, [(struct.pack(">q", 1) + b"\x00", b"\x02a")])])
    c = decode(h, buf, 5, True)
    assert c.num_rows == 0 and c.equals(decode(h, buf, 5, False))


def _string_value(raw: bytes) -> bytes:
    """A block of one LONG -> STRING entry whose value bytes are ``raw``."""
    return block(9, 1, [(1, [(struct.pack(">q", 42) + b"\x00", raw)])])


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
    h = _header("LONG", "STRING")
    same(h, _string_value(raw), 9)


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
    h = _header("LONG", "STRING")
    buf = _string_value(raw)
    assert keyed_columns_read.native_columns(buf, 0, 9, 1, 3, 1, NativePlan(1, 9)) is None
    got = outcome(h, buf, 9, True)
    assert isinstance(got, tuple) and got == outcome(h, buf, 9, False)  # (error type, message)


@pytest.mark.parametrize(
    ("key", "value"), [("LONG", "STRING"), ("STRING", "BYTES"), ("INT", "DOUBLE"), ("CHAR", "BOOLEAN")]
)
def test_every_truncation_and_corruption_alike(key: str, value: str) -> None:
    """Cut short at every byte, or one byte changed: rows or typed error as the Python path."""
    rng = random.Random(key + value)
    h = _header(key, value)
    pairs = [(_random(key, rng), _random(value, rng)) for _ in range(6)]
    buf = _values_block(key, value, 12, 1, pairs)
    for end in range(len(buf)):
        cut = buf[:end]
        assert outcome(h, cut, 12, True) == outcome(h, cut, 12, False), end
    for at in range(len(buf)):
        bad = bytearray(buf)
        bad[at] ^= rng.choice([0x01, 0x80, 0xFF])
        assert outcome(h, bytes(bad), 12, True) == outcome(h, bytes(bad), 12, False), at


@pytest.mark.parametrize(
    "buf",
    [
        block(3, 1, [(3, [(struct.pack(">q", 1) + b"\x00", b"\x02a")])]),  # unknown state id
        block(4, 1, [(1, [(struct.pack(">q", 1) + b"\x00", b"\x02a")])]),  # another key group's prefix
        block(3, 1, [(1, [(struct.pack(">q", 1), b"\x02a")])]),  # no namespace byte
        block(3, 1, [(1, [(struct.pack(">i", 1) + b"\x00", b"\x02a")])]),  # a short key
        block(3, 1, [(1, [(struct.pack(">q", 1) + b"\x00\x00", b"\x02a")])]),  # trailing key bytes
        block(3, 1, [(1, [(b"", b"\x02a")])]),  # the prefix alone
    ],
)
def test_malformed_entries_are_left_to_the_python_path(buf: bytes) -> None:
    assert keyed_columns_read.native_columns(buf, 0, 3, 1, 3, 1, NativePlan(1, 9)) is None
    h = _header("LONG", "STRING")
    got = outcome(h, buf, 3, True)
    assert isinstance(got, tuple) and got == outcome(h, buf, 3, False)  # (error type, message)


ATOMIC_STATES = ["v_long", "v_int", "v_short", "v_byte", "v_bool", "v_double", "v_float", "v_char"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", CANONICAL)
def test_fixtures_read_alike_with_the_accelerator_on_and_off(
    version: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    states = [*ATOMIC_STATES, "v_string", "v_bytes", "r_sum"]
    path = str(fixture(version, kind))
    taken = count_native(monkeypatch)
    on = {s: read_savepoint(path).keyed_state("keyed-states", s) for s in states}
    assert taken and all(taken)
    monkeypatch.setattr(keyed_columns_read, "_native", None)
    for state in states:
        off = read_savepoint(path).keyed_state("keyed-states", state)
        assert on[state].schema == off.schema
        assert plain(on[state].sort_by("key")) == plain(off.sort_by("key")), state
