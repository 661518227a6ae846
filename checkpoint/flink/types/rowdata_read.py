"""Flink SQL's ``RowData`` state: the serializer snapshot's logical types and the binary row.

``RowDataSerializer``'s snapshot is an int field count, each field's ``LogicalType`` as a
Java serialization stream, then the nested field serializers' snapshots. A value is an
int length and a ``BinaryRowData``: a null bit set (the first byte holds the row kind,
field ``i`` is bit ``i + 8``) padded to 8-byte words, one 8-byte little-endian slot per
field, then a variable part. Strings and bytes of at most 7 bytes sit in the slot (the
slot's last byte is ``0x80 | length``); longer ones, non-compact decimals (precision > 18)
and timestamps (precision > 3) store ``offset << 32 | size`` (or nanos of the millisecond)
pointing into the variable part.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flinkstate.state.errors import SerializationError
from flinkstate.state.types.mapping import RowTypeInfo, TypeInformation, Types

from ..errors import FlinkFormatError, UnsupportedSerializerError
from ..wire.data_read import Cursor
from ..wire.objects_read import JavaStreamReader
from . import classes
from .flink_type import FlinkType
from .values_read import RawSerializer, _ReadOnly

_TABLE = "org.apache.flink.table.runtime.typeutils."
_TABLE_SNAPSHOTS = {
    f"{_TABLE}StringDataSerializer$StringDataSerializerSnapshot": 0,
    f"{_TABLE}DecimalDataSerializer$DecimalSerializerSnapshot": 2,
    f"{_TABLE}TimestampDataSerializer$TimestampDataSerializerSnapshot": 1,
}
_EPOCH = datetime.date(1970, 1, 1)
_ARROW: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INTEGER": pa.int32(),
    "BIGINT": pa.int64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "CHAR": pa.string(),
    "VARCHAR": pa.string(), "BINARY": pa.binary(), "VARBINARY": pa.binary(), "DATE": pa.date32(),
    "TIME_WITHOUT_TIME_ZONE": pa.time32("ms"),
}  # fmt: skip
_SLOT = {
    "BOOLEAN": struct.Struct("<?"), "TINYINT": struct.Struct("<b"), "SMALLINT": struct.Struct("<h"),
    "INTEGER": struct.Struct("<i"), "BIGINT": struct.Struct("<q"), "FLOAT": struct.Struct("<f"),
    "DOUBLE": struct.Struct("<d"), "DATE": struct.Struct("<i"), "TIME_WITHOUT_TIME_ZONE": struct.Struct("<i"),
}  # fmt: skip
_TIMESTAMPS = ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE")
_LONG = struct.Struct("<q")
_LEN = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class SqlTypeInfo(TypeInformation):
    """A Flink SQL logical type of a ``RowData`` field (``root`` is ``LogicalTypeRoot``'s name)."""

    root: str
    precision: int = 0
    scale: int = 0

    def to_arrow(self) -> pa.DataType:
        if self.root == "DECIMAL":
            return pa.decimal128(self.precision, self.scale)
        if self.root in _TIMESTAMPS:
            unit = "ms" if self.precision <= 3 else "us" if self.precision <= 6 else "ns"
            return pa.timestamp(unit, tz="UTC" if self.root != _TIMESTAMPS[0] else None)
        return _ARROW[self.root]

    def to_json(self) -> dict[str, Any]:
        return {"type": "SQL", "root": self.root, "precision": self.precision, "scale": self.scale}

    @property
    def python_type(self) -> type:
        return object

    def __str__(self) -> str:
        if self.root == "DECIMAL":
            return f"DECIMAL({self.precision}, {self.scale})"
        if self.root in _TIMESTAMPS:
            return f"{self.root.replace('_', ' ').replace('WITHOUT TIME ZONE', '').strip()}({self.precision})"
        return self.root


def _int_field(obj: dict[str, Any], name: str, what: str) -> int:
    """The int field ``name`` of a deserialized object; a missing or other one is [FLINK_FORMAT]."""
    value = obj.get(name)
    if type(value) is not int:
        raise FlinkFormatError(f"{what}: the RowData field's SQL type has no int {name!r} (found {value!r})")
    return value


def _logical(obj: Any, what: str) -> SqlTypeInfo:
    """Our type for a deserialized ``LogicalType`` object; unsupported roots raise."""
    root = obj.get("typeRoot") if isinstance(obj, dict) else None
    if root == "DECIMAL":
        return SqlTypeInfo(root, _int_field(obj, "precision", what), _int_field(obj, "scale", what))
    if root in _TIMESTAMPS:
        return SqlTypeInfo(root, _int_field(obj, "precision", what))
    if root in _ARROW:
        return SqlTypeInfo(root)
    raise UnsupportedSerializerError(f"{what}: RowData field of SQL type {root} is not decoded")


def read_rowdata_snapshot(
    c: Cursor, what: str, read_snapshot: Callable[[Cursor, str], FlinkType]
) -> FlinkType:
    """The FlinkType of a ``RowDataSerializer`` snapshot (``c`` after its class and version)."""
    objects = [JavaStreamReader(c, f"{what} field {i} type").read() for i in range(c.count(f"{what} arity"))]
    c.expect_int(classes.NESTED_MAGIC, f"{what} nested snapshots magic")
    c.i32(f"{what} nested snapshots version")
    for i in range(c.count(f"{what} nested count", 6)):
        at = c.pos
        name = c.utf(f"{what} field {i} snapshot class")
        c.i32(f"{what} field {i} snapshot version")
        if name in _TABLE_SNAPSHOTS:
            for _ in range(_TABLE_SNAPSHOTS[name]):
                c.i32(f"{what} field {i} snapshot parameter")
        else:
            c.pos = at
            read_snapshot(c, f"{what} field {i}")
    try:
        fields = tuple(_logical(o, f"{what} field {i}") for i, o in enumerate(objects))
    except UnsupportedSerializerError as exc:
        raw = Types.PRIMITIVE_ARRAY(Types.BYTE())
        return FlinkType(classes.ROWDATA, raw, RawSerializer(), False, java_class=f"RowData ({exc.detail})")
    t = RowTypeInfo(fields, tuple(f"f{i}" for i in range(len(fields))), "ROW")
    return FlinkType(classes.ROWDATA, t, RowDataReader(fields))


class RowDataReader(_ReadOnly):
    """Reads ``RowDataSerializer`` bytes (int length, binary row) as a tuple of field values:
    ints, floats, str, bytes, ``Decimal``, dates; timestamps as ints in their Arrow unit."""

    def __init__(self, fields: tuple[SqlTypeInfo, ...]) -> None:
        self.fields = fields
        self.null_bytes = (len(fields) + 63 + 8) // 64 * 8

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        (size,) = _LEN.unpack_from(buf, pos)
        start, end = pos + 4, pos + 4 + size
        if size < self.null_bytes + 8 * len(self.fields) or end > len(buf):
            raise SerializationError(f"binary row of {size} bytes does not fit {len(self.fields)} fields")
        row = buf[start:end]
        return tuple(self._field(row, i, t) for i, t in enumerate(self.fields)), end

    def _var(self, row: bytes, slot: int) -> tuple[int, int]:
        (word,) = _LONG.unpack_from(row, slot)
        offset, low = (word >> 32) & 0x7FFFFFFF, word & 0xFFFFFFFF
        return offset, low

    def _bytes(self, row: bytes, slot: int) -> bytes:
        mark = row[slot + 7]
        if mark & 0x80:
            return row[slot : slot + (mark & 0x7F)]
        offset, size = self._var(row, slot)
        if offset + size > len(row):
            raise SerializationError(f"field data at {offset}+{size} beyond the row's {len(row)} bytes")
        return row[offset : offset + size]

    def _field(self, row: bytes, i: int, t: SqlTypeInfo) -> Any:
        bit = i + 8
        if row[bit >> 3] & (1 << (bit & 7)):
            return None
        slot = self.null_bytes + 8 * i
        root = t.root
        if root in ("CHAR", "VARCHAR"):
            return self._bytes(row, slot).decode("utf-8")
        if root in ("BINARY", "VARBINARY"):
            return self._bytes(row, slot)
        if root == "DATE":
            return _EPOCH + datetime.timedelta(days=_SLOT[root].unpack_from(row, slot)[0])
        if root == "TIME_WITHOUT_TIME_ZONE":
            ms = _SLOT[root].unpack_from(row, slot)[0]
            return datetime.time(ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60, ms % 1000 * 1000)
        if root in _SLOT:
            return _SLOT[root].unpack_from(row, slot)[0]
        if root == "DECIMAL":
            if t.precision <= 18:
                unscaled = _LONG.unpack_from(row, slot)[0]
            else:
                unscaled = int.from_bytes(self._bytes(row, slot), "big", signed=True)
            return decimal.Decimal(f"{unscaled}E-{t.scale}")
        # Timestamps: epoch millis in the slot, or (offset, nanos of the millisecond).
        if t.precision <= 3:
            return _LONG.unpack_from(row, slot)[0]
        offset, nanos = self._var(row, slot)
        millis = _LONG.unpack_from(row, offset)[0]
        total = millis * 1_000_000 + nanos
        return total // 1000 if t.precision <= 6 else total


#: Field types whose BinaryRowData bytes :func:`key_group_of` writes (others: no key group).
_KEY_ROOTS = frozenset(_SLOT) - {"TIME_WITHOUT_TIME_ZONE"} | {"CHAR", "VARCHAR", "BINARY", "VARBINARY"}
_MASK32 = 0xFFFFFFFF


def _binary_row(fields: tuple[SqlTypeInfo, ...], values: tuple[Any, ...]) -> bytes:
    """The BinaryRowData Flink's BinaryRowWriter builds for ``values`` (row kind INSERT)."""
    null_bytes = (len(fields) + 63 + 8) // 64 * 8
    fixed = bytearray(null_bytes + 8 * len(fields))
    var = bytearray()
    for i, (t, v) in enumerate(zip(fields, values, strict=True)):
        slot = null_bytes + 8 * i
        if v is None:
            fixed[(i + 8) >> 3] |= 1 << ((i + 8) & 7)
        elif t.root == "DATE":
            _SLOT["DATE"].pack_into(fixed, slot, (v - _EPOCH).days)
        elif t.root in _SLOT:
            _SLOT[t.root].pack_into(fixed, slot, v)
        else:
            data = v.encode("utf-8") if isinstance(v, str) else bytes(v)
            if len(data) <= 7:
                fixed[slot : slot + len(data)] = data
                fixed[slot + 7] = 0x80 | len(data)
            else:
                _LONG.pack_into(fixed, slot, (len(fixed) + len(var)) << 32 | len(data))
                var += data + bytes(-len(data) % 8)
    return bytes(fixed + var)


def _murmur_words(data: bytes) -> int:
    """Flink's ``MurmurHashUtil.hashUnsafeBytesByWords`` (seed 42), as a signed int."""
    h = 42
    for (k,) in struct.iter_unpack("<I", data):
        k = (k * 0xCC9E2D51) & _MASK32
        k = ((k << 15 | k >> 17) & _MASK32) * 0x1B873593 & _MASK32
        h ^= k
        h = ((h << 13 | h >> 19) & _MASK32) * 5 + 0xE6546B64 & _MASK32
    h ^= len(data)
    h = (h ^ h >> 16) * 0x85EBCA6B & _MASK32
    h = (h ^ h >> 13) * 0xC2B2AE35 & _MASK32
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def key_group_of(fields: tuple[SqlTypeInfo, ...], key: tuple[Any, ...], max_parallelism: int) -> int | None:
    """Flink's key group of a RowData key (its BinaryRowData's hash code), or None when a
    field's type is not one this writes (no key group is then pruned)."""
    from flinkstate.state.keygroups.assignment import compute_key_group_for_key_hash

    if len(key) != len(fields) or any(t.root not in _KEY_ROOTS for t in fields):
        return None
    return compute_key_group_for_key_hash(_murmur_words(_binary_row(fields, key)), max_parallelism)
