"""A second implementation of Flink's BinaryRowData layout (as RowDataSerializer writes it),
written from BinaryRowWriter's rules, to check the reader on random rows."""

from __future__ import annotations

import datetime
import decimal
import struct
from typing import Any

from flinkstate.checkpoint.flink.types.rowdata_read import SqlTypeInfo

_FIXED = {
    "BOOLEAN": "<?",
    "TINYINT": "<b",
    "SMALLINT": "<h",
    "INTEGER": "<i",
    "BIGINT": "<q",
    "FLOAT": "<f",
    "DOUBLE": "<d",
}


def _unscaled(v: decimal.Decimal, scale: int) -> int:
    return int(v.scaleb(scale, decimal.Context(prec=100)))


def encode(fields: list[SqlTypeInfo], values: list[Any]) -> bytes:
    """``values``: ints, floats, str, bytes, Decimal, date; timestamps as epoch ms (p <= 3) or ns."""
    n = len(fields)
    null_bytes = (n + 63 + 8) // 64 * 8
    fixed = bytearray(null_bytes + 8 * n)
    var = bytearray()

    def append(data: bytes, reserve: int = 0) -> int:
        offset = len(fixed) + len(var)
        var.extend(data.ljust(max(reserve, (len(data) + 7) // 8 * 8), b"\x00"))
        return offset

    for i, (t, v) in enumerate(zip(fields, values, strict=True)):
        slot = null_bytes + 8 * i
        if v is None:
            bit = i + 8
            fixed[bit >> 3] |= 1 << (bit & 7)
            continue
        if t.root in _FIXED:
            struct.pack_into(_FIXED[t.root], fixed, slot, v)
        elif t.root == "DATE":
            struct.pack_into("<i", fixed, slot, (v - datetime.date(1970, 1, 1)).days)
        elif t.root in ("VARCHAR", "VARBINARY"):
            data = v.encode("utf-8") if isinstance(v, str) else v
            if len(data) <= 7:
                fixed[slot : slot + len(data)] = data
                fixed[slot + 7] = 0x80 | len(data)
            else:
                struct.pack_into("<q", fixed, slot, append(data) << 32 | len(data))
        elif t.root == "DECIMAL":
            unscaled = _unscaled(v, t.scale)
            if t.precision <= 18:
                struct.pack_into("<q", fixed, slot, unscaled)
            else:
                data = unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)
                struct.pack_into("<q", fixed, slot, append(data, 16) << 32 | len(data))
        elif t.precision <= 3:
            struct.pack_into("<q", fixed, slot, v)
        else:
            millis, nanos = divmod(v, 1_000_000)
            struct.pack_into("<q", fixed, slot, append(struct.pack("<q", millis)) << 32 | nanos)
    row = bytes(fixed + var)
    return struct.pack(">i", len(row)) + row


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def flink_hash(row: bytes, seed: int = 42) -> int:
    """Flink's BinaryRowData hash code: 32-bit murmur3 over the row's 4-byte words."""
    h = seed
    for (k,) in struct.iter_unpack("<I", row):
        k = _rotl((k * 0xCC9E2D51) & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
        h = (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= len(row)
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h
