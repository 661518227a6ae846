"""A second implementation of the Kryo bytes Flink's KryoSerializer writes (FieldSerializer,
references on), written from Kryo's rules, to check the reader against random values: Kryo 5
(Flink 2.x) and Kryo 2 (Flink 1.x: the same, but short, char, float and double big-endian).
A Java char is a string field with the metadata {b"flinkstate.java": b"char"}."""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa


def uvarint(v: int, max_bytes: int) -> bytes:
    out = bytearray()
    for i in range(max_bytes):
        if i == 8:
            out.append(v & 0xFF)
            return bytes(out)
        if v < 0x80:
            out.append(v)
            return bytes(out)
        out.append(v & 0x7F | 0x80)
        v >>= 7
    raise ValueError("too large")


def zigzag(v: int, bits: int) -> bytes:
    z = ((v << 1) ^ (v >> (bits - 1))) & ((1 << bits) - 1)
    return uvarint(z, 5 if bits == 32 else 9)


def string(s: str | None, kryo: int = 5) -> bytes:
    """Kryo ``kryo``'s ``writeString``: Kryo 5 writes 2-32 ASCII chars as an ASCII run, Kryo 2 2-63."""
    if s is None:
        return b"\x80"
    if not s:
        return b"\x81"
    if 1 < len(s) <= (32 if kryo == 5 else 63) and all(ord(c) < 128 for c in s):
        raw = bytearray(s.encode("ascii"))
        raw[-1] |= 0x80
        return bytes(raw)
    encoded = s.encode("utf-16-be", "surrogatepass")
    units = struct.unpack(f">{len(encoded) // 2}H", encoded)
    n = len(units) + 1
    head = bytearray([0x80 | (n & 0x3F) | (0x40 if n > 0x3F else 0)])
    if n > 0x3F:
        head += uvarint(n >> 6, 4)
    for u in units:
        if 0 < u < 0x80:
            head.append(u)
        elif u < 0x800:
            head += bytes([0xC0 | u >> 6, 0x80 | u & 0x3F])
        else:
            head += bytes([0xE0 | u >> 12, 0x80 | u >> 6 & 0x3F, 0x80 | u & 0x3F])
    return bytes(head)


def _field_value(f: pa.Field, v: Any, kryo: int) -> bytes:
    if (f.metadata or {}).get(b"flinkstate.java") == b"char":
        return struct.pack(">H" if kryo == 2 else "<H", ord(v))
    return _value(f.type, v, kryo)


def _value(t: pa.DataType, v: Any, kryo: int) -> bytes:
    if pa.types.is_int64(t):
        return zigzag(v, 64)
    if pa.types.is_int32(t):
        return zigzag(v, 32)
    if pa.types.is_string(t):
        return string(v, kryo)
    fmt = {pa.int16(): "h", pa.int8(): "b", pa.bool_(): "?", pa.float32(): "f", pa.float64(): "d"}[t]
    return struct.pack((">" if kryo == 2 else "<") + fmt, v)


def encode(
    struct_type: pa.StructType, value: dict[str, Any] | None, class_id: int = 85, kryo: int = 5
) -> bytes:
    """``kryo.writeClassAndObject`` (Kryo ``kryo``) of a registered class holding ``value``'s fields."""
    if value is None:
        return b"\x00"
    out = bytearray(uvarint(class_id + 2, 5) + b"\x01")
    fields = sorted((struct_type.field(i) for i in range(struct_type.num_fields)), key=lambda f: f.name)
    for f in fields:
        v = value[f.name]
        if f.nullable:
            out += b"\x00" if v is None else b"\x01" + _field_value(f, v, kryo)
        else:
            out += _field_value(f, v, kryo)
    return bytes(out)


def flag_varint(flag: bool, v: int) -> bytes:
    """Kryo 5's ``writeVarIntFlag``: bit 7 the flag, bit 6 "more", 6 bits, then a varint of the rest."""
    first = (0x80 if flag else 0) | (v & 0x3F) | (0x40 if v > 0x3F else 0)
    return bytes([first]) + (uvarint(v >> 6, 5) if v > 0x3F else b"")


def element_list(items: list[Any] | None, element: pa.DataType, kryo: int, name_known: bool) -> bytes:
    """A ``List<T>`` field (an ``ArrayList``, generics known): class (by name, the name only where
    the value has not named it yet), new-object marker, size, the elements (after a null marker
    in Kryo 2, and in Kryo 5 for Strings or where one is null)."""
    if items is None:
        return b"\x00"
    out = bytearray(b"\x01\x00" + (b"" if name_known else string("java.util.ArrayList", kryo)) + b"\x01")
    has_null = None in items
    out += uvarint(len(items), 5) if kryo == 2 else flag_varint(has_null, len(items) + 1)
    markers = kryo == 2 or has_null or pa.types.is_string(element)
    for item in items:
        if item is None:
            out += b"\x00"
        else:
            out += (b"\x01" if markers else b"") + _value(element, item, kryo)
    return bytes(out)


def encode_with_lists(
    struct_type: pa.StructType, value: dict[str, Any] | None, class_id: int = 85, kryo: int = 5
) -> bytes:
    """:func:`encode`, with ``ARRAY<T>`` fields (``java.util.ArrayList`` of String, Long, ...)."""
    if value is None:
        return b"\x00"
    out = bytearray(uvarint(class_id + 2, 5) + b"\x01")
    named = False
    for f in sorted((struct_type.field(i) for i in range(struct_type.num_fields)), key=lambda f: f.name):
        v = value[f.name]
        if pa.types.is_list(f.type):
            out += element_list(v, f.type.value_type, kryo, named)
            named = named or v is not None
        elif f.nullable:
            out += b"\x00" if v is None else b"\x01" + _field_value(f, v, kryo)
        else:
            out += _field_value(f, v, kryo)
    return bytes(out)
