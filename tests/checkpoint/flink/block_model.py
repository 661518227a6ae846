"""Canonical key-group blocks built from entry bytes, and one decode of them with the C
accelerator (``_keyed_columns``) or with the general Python decoder alone, to compare."""

from __future__ import annotations

import math
import struct
from typing import Any

import pyarrow as pa

from flinkstate.checkpoint.flink.reader.tables import keyed_table
from flinkstate.checkpoint.flink.streams.header_read import KeyedHeader, StateInfo
from flinkstate.checkpoint.flink.streams.keyed_read import KeyGroupDecoder
from flinkstate.checkpoint.flink.types import classes
from flinkstate.checkpoint.flink.types.flink_type import FlinkType
from flinkstate.state.errors import FlinkStateError

VOID = FlinkType(classes.VOID, None, None, fixed_width=True)


def header(key: FlinkType, value: FlinkType, states: int = 3) -> KeyedHeader:
    """A keyed header of ``states`` VALUE states ``s0``, ``s1``, ... keyed by ``key``."""
    infos = tuple(StateInfo(i, f"s{i}", "VALUE", VOID, value, None, value) for i in range(states))
    return KeyedHeader(6, False, key, infos, 0)


def entry(key_raw: bytes, value_raw: bytes) -> bytes:
    return struct.pack(">i", len(key_raw)) + key_raw + struct.pack(">i", len(value_raw)) + value_raw


def block(kg: int, prefix: int, runs: list[tuple[int, list[tuple[bytes, bytes]]]]) -> bytes:
    """A canonical block of (state id, [(key bytes after the prefix, value bytes)]) runs."""
    out = bytearray()
    for state_id, entries in runs:
        out += struct.pack(">H", state_id)
        for i, (key, value) in enumerate(entries):
            head = bytearray(kg.to_bytes(prefix, "big"))
            if i == len(entries) - 1:
                head[0] |= 0x80
            out += entry(bytes(head) + key, value)
    return bytes(out + struct.pack(">H", 0xFFFF))


def _decoder(h: KeyedHeader, native: bool, max_p: int) -> KeyGroupDecoder:
    decoder = KeyGroupDecoder(h, max_p, "test", ["s1"])
    decoder.columnar = None  # chunks come from the C path only
    if not native:
        decoder.native = None
    return decoder


def decode(h: KeyedHeader, buf: bytes, kg: int, native: bool, max_p: int = 128) -> pa.Table:
    """State ``s1``'s table; with ``native``, the block must be the accelerator's to take."""
    decoder = _decoder(h, native, max_p)
    decoder.canonical(buf, 0, kg)
    rows = decoder.rows[1]
    assert bool(rows.chunks) == native, "the C path did not take a block it should"
    return keyed_table(rows, h.key)


def outcome(h: KeyedHeader, buf: bytes, kg: int, native: bool, max_p: int = 128) -> Any:
    """State ``s1``'s rows, or the type and message of the typed error its decoding raised."""
    decoder = _decoder(h, native, max_p)
    try:
        decoder.canonical(buf, 0, kg)
        return plain(keyed_table(decoder.rows[1], h.key))
    except FlinkStateError as exc:
        return type(exc), str(exc)


def _norm(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return {k: _norm(x) for k, x in v.items()} if isinstance(v, dict) else v


def plain(table: pa.Table) -> list[dict[str, Any]]:
    """The rows, NaNs made equal."""
    return [_norm(r) for r in table.to_pylist()]


def same(h: KeyedHeader, buf: bytes, kg: int, max_p: int = 128) -> None:
    """The accelerator takes the block and gives the general decoder's table."""
    c, python = decode(h, buf, kg, True, max_p), decode(h, buf, kg, False, max_p)
    assert c.schema == python.schema
    assert plain(c) == plain(python)


def count_native(monkeypatch: Any) -> list[bool]:
    """Record, for each key-group block the reader decodes, whether the C decoder took it."""
    from flinkstate.checkpoint.flink.streams import keyed_columns_read

    taken: list[bool] = []
    native = keyed_columns_read.native_columns

    def counting(*args: Any) -> Any:
        found = native(*args)
        taken.append(found is not None)
        return found

    monkeypatch.setattr("flinkstate.checkpoint.flink.streams.keyed_read.native_columns", counting)
    return taken
