"""Kryo-serialized values decoded with a struct type the user declares.

Flink 2.x's ``KryoSerializer`` writes ``kryo.writeClassAndObject`` with Kryo 5 and
references on: the class (a varint: 0 for a null object, 1 then a name for unregistered
classes, else the registration id + 2), a reference marker (varint 1 for a new object),
then ``FieldSerializer``'s fields, sorted by name (inherited ones included). Field layout:

* ``long`` / ``int``: zigzag varint; ``short`` and ``char`` (a UTF-16 unit): 2 bytes, ``float``
  4, ``double`` 8, little-endian; ``byte``, ``boolean``: 1 byte. Declared ``NOT NULL``.
* ``String`` and boxed ``Long``, ``Integer``, ``Short``, ``Byte``, ``Boolean``, ``Float``,
  ``Double``, ``Character`` (nullable): a marker byte (0 null, 1 a value), then the value as above; a
  String is Kryo's string (an ASCII run whose last byte has bit 7 set, or a flagged varint
  of char count + 1 followed by the chars in Kryo's UTF-8).

Flink 1.x writes with Kryo 2 (2.24), the same but for the fixed-width fields: ``short``,
``char``, ``float`` and ``double`` are big-endian there (:data:`FIXED_KRYO2`). Nothing in the bytes tells
the two apart: the reader is given the Kryo version (``kryo``: 2 or 5, or a function giving it
when the first value is read, which raises ``[FLINK_VERSION_REQUIRED]`` when the savepoint's
files do not tell: :mod:`..metadata.versions`).

Only classes Kryo writes with ``FieldSerializer`` and fields of those types decode; a
declared type that does not match the bytes raises :class:`DeclaredTypeError` naming the
state and the byte offset. Kryo back references (one object reached twice) are refused.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flinkstate.state.errors import SerializationError
from flinkstate.state.types.mapping import is_java_char

from ..errors import DeclaredTypeError
from .kryo_lists import Names, check_collection, field_elements, is_collection, list_reader
from .values_read import _ReadOnly

Read = Callable[[bytes, int], tuple[Any, int]]
#: The one table of Kryo field encodings, which the reader and the writer (:mod:`.kryo_write`)
#: both go by: a declared Arrow type's encoding (the first whose test it passes).
ENCODINGS: tuple[tuple[str, Callable[[pa.DataType], bool]], ...] = (
    ("long", pa.types.is_int64),
    ("int", pa.types.is_int32),
    ("short", pa.types.is_int16),
    ("byte", pa.types.is_int8),
    ("boolean", pa.types.is_boolean),
    ("float", pa.types.is_float32),
    ("double", pa.types.is_float64),
    ("string", pa.types.is_string),
)
#: The fixed-width encodings of Kryo 5 (Flink 2.x): little-endian (``char``: its UTF-16 unit).
FIXED = {
    "short": struct.Struct("<h"),
    "char": struct.Struct("<H"),
    "byte": struct.Struct("<b"),
    "float": struct.Struct("<f"),
    "double": struct.Struct("<d"),
}
#: The fixed-width encodings of Kryo 2 (Flink 1.x): big-endian.
FIXED_KRYO2 = {name: struct.Struct(">" + s.format[1:]) for name, s in FIXED.items()}
KRYO_VERSIONS = (2, 5)
#: Declared in Spark DDL (for messages).
_DECLARED = (
    "BIGINT, INT, SMALLINT, TINYINT, BOOLEAN, FLOAT, DOUBLE, CHAR (NOT NULL: a primitive), STRING and "
    "ARRAY<STRING|BIGINT|INT|DOUBLE> (a java.util.ArrayList)"
)


def encoding(field: pa.Field) -> str | None:
    """The Kryo encoding of a declared field (None: Kryo fields of it are not decoded): by its
    type, or ``char`` for a Java char (:func:`~flinkstate.state.types.mapping.char_field`)."""
    if is_java_char(field):
        return "char"
    return next((name for name, test in ENCODINGS if test(field.type)), None)


def java_order(fields: list[pa.Field]) -> list[pa.Field]:
    """``fields`` in the order Kryo writes them: by name, as Java compares strings (UTF-16 units)."""
    return sorted(fields, key=lambda f: f.name.encode("utf-16-be"))


def varint(buf: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """Kryo's unsigned varint: 7 bits a byte, low first (the 9th byte of a long has 8 bits)."""
    result, shift = 0, 0
    for i in range(max_bytes):
        b = buf[pos]
        pos += 1
        if i == 8:
            return result | (b << 56), pos
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise SerializationError("varint too long")


def _zigzag(bits: int) -> Callable[[bytes, int], tuple[int, int]]:
    width = 5 if bits == 32 else 9

    def read(buf: bytes, pos: int) -> tuple[int, int]:
        v, pos = varint(buf, pos, width)
        v &= (1 << bits) - 1
        return (v >> 1) ^ -(v & 1), pos

    return read


def kryo_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    """Kryo 5 ``Output.writeString``: None, an ASCII run or a char count and Kryo UTF-8."""
    b = buf[pos]
    if not b & 0x80:
        end = pos
        while not buf[end] & 0x80:
            end += 1
        raw = bytes(buf[pos:end]) + bytes([buf[end] & 0x7F])
        return raw.decode("ascii"), end + 1
    count = b & 0x3F
    pos += 1
    if b & 0x40:
        rest, pos = varint(buf, pos, 4)
        count |= rest << 6
    if count == 0:
        return None, pos
    units = []
    for _ in range(count - 1):
        c = buf[pos]
        if c >> 4 < 8:
            units.append(c)
            pos += 1
        elif c >> 4 in (12, 13):
            units.append((c & 0x1F) << 6 | buf[pos + 1] & 0x3F)
            pos += 2
        elif c >> 4 == 14:
            units.append((c & 0x0F) << 12 | (buf[pos + 1] & 0x3F) << 6 | buf[pos + 2] & 0x3F)
            pos += 3
        else:
            raise SerializationError(f"bad Kryo UTF-8 byte {c:#x}")
    text = struct.pack(f">{len(units)}H", *units).decode("utf-16-be", "surrogatepass")
    return text, pos


def _fixed(s: struct.Struct) -> Read:
    return lambda buf, pos: (s.unpack_from(buf, pos)[0], pos + s.size)


def _char(s: struct.Struct) -> Read:
    def read(buf: bytes, pos: int) -> tuple[str, int]:
        unit = s.unpack_from(buf, pos)[0]
        if 0xD800 <= unit <= 0xDFFF:
            raise SerializationError(f"char {unit:#06x} is half a surrogate pair, which no string holds")
        return chr(unit), pos + 2

    return read


def _fixed_readers(table: dict[str, struct.Struct]) -> dict[str, Read]:
    return {name: _char(s) if name == "char" else _fixed(s) for name, s in table.items()}


def _boolean(buf: bytes, pos: int) -> tuple[bool, int]:
    if buf[pos] > 1:
        raise SerializationError(f"boolean byte {buf[pos]}")
    return buf[pos] == 1, pos + 1


_COMMON: dict[str, Read] = {
    "long": _zigzag(64),
    "int": _zigzag(32),
    "boolean": _boolean,
    "string": kryo_string,
}
#: Field readers by Kryo version.
_READ: dict[int, dict[str, Read]] = {
    5: {**_COMMON, **_fixed_readers(FIXED)},
    2: {**_COMMON, **_fixed_readers(FIXED_KRYO2)},
}


def _nullable(inner: Read) -> Read:
    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        marker = buf[pos]
        if marker == 0:
            return None, pos + 1
        if marker != 1:
            raise SerializationError(f"null marker {marker} (a Kryo back reference is not supported)")
        return inner(buf, pos + 1)

    return read


def _field_reader(field: pa.Field, what: str, kryo: int, names: Names) -> Read:
    if is_collection(field.type):
        element = check_collection(field, encoding(field.type.value_field), what)
        elements = field_elements(kryo, element, _READ[kryo][element])
        return list_reader(kryo, names, lambda buf, pos: varint(buf, pos, 5), kryo_string, elements)
    name = encoding(field)
    if name is None:
        raise DeclaredTypeError(
            f"{what}: field {field.name} of type {field.type} cannot be read from Kryo bytes; declared "
            f"Kryo fields are {_DECLARED}"
        )
    read = _READ[kryo][name]
    return read if name != "string" and not field.nullable else _nullable(read)


class KryoReader(_ReadOnly):
    """Reads one Kryo ``writeClassAndObject`` value as a dict of the declared fields, with the
    encodings of Kryo ``kryo`` (2: Flink 1.x, 5: 2.x; a function: asked when the first value is
    read, so a savepoint whose files do not tell fails only where its Kryo values are read)."""

    def __init__(
        self, declared: pa.DataType, java_class: str, what: str, kryo: int | Callable[[], int] = 5
    ) -> None:
        if not pa.types.is_struct(declared):
            raise DeclaredTypeError(
                f"{what}: a Kryo class ({java_class}) is declared as a STRUCT, not {declared}"
            )
        fields = [declared.field(i) for i in range(declared.num_fields)]
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise DeclaredTypeError(f"{what}: duplicate field names in {declared}")
        ordered = java_order(fields)
        self._names = Names()  # the class names of the value being read, by name id
        self._fields = {
            v: [(f.name, _field_reader(f, what, v, self._names)) for f in ordered] for v in KRYO_VERSIONS
        }
        self.declared = declared
        #: The declared fields in the order Kryo writes them.
        self.written = ordered
        self._kryo = kryo
        self.java_class = java_class
        self.order = names
        self.what = what
        #: The registration id of the first value read: every value must carry it (another
        #: id is another class, whose fields the declaration does not describe).
        self.class_id: int | None = None

    @property
    def kryo(self) -> int:
        """The Kryo version the values are read with (asked once, when given as a function)."""
        if not isinstance(self._kryo, int):
            self._kryo = self._kryo()
        if self._kryo not in KRYO_VERSIONS:
            raise DeclaredTypeError(f"{self.what}: Kryo version {self._kryo} (known: 2 and 5)")
        return self._kryo

    @property
    def fields(self) -> list[tuple[str, Read]]:
        """(name, reader) of the declared fields in the order Kryo writes them."""
        return self._fields[self.kryo]

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        start = pos
        fields = self.fields  # [FLINK_VERSION_REQUIRED] before any byte is read
        try:
            return self._read(buf, pos, fields)
        except (SerializationError, IndexError, struct.error, UnicodeDecodeError) as exc:
            raise DeclaredTypeError(
                f"{self.what} does not fit the Kryo bytes of the value at byte {start}: {exc}"
            ) from exc

    def from_bytes(self, data: bytes | bytearray | memoryview) -> Any:
        buf = bytes(data)
        value, pos = self.read(buf, 0)
        if pos != len(buf):
            raise DeclaredTypeError(
                f"{self.what} does not fit the Kryo bytes: {len(buf) - pos} of {len(buf)} bytes left over"
            )
        return value

    def _read(self, buf: bytes, pos: int, fields: list[tuple[str, Read]]) -> tuple[Any, int]:
        class_id, pos = varint(buf, pos, 5)
        if class_id == 0:
            return None, pos
        self._names.reset()
        if class_id == 1:
            name_id, pos = varint(buf, pos, 5)
            name, pos = kryo_string(buf, pos)
            self._names.reset(name)
            if name != self.java_class:
                raise SerializationError(f"Kryo class {name} (name id {name_id}), not {self.java_class}")
        elif self.class_id is None:
            self.class_id = class_id
        elif class_id != self.class_id:
            raise SerializationError(
                f"Kryo class id {class_id - 2} where earlier values had {self.class_id - 2}"
            )
        marker, pos = varint(buf, pos, 5)
        if marker != 1:
            raise SerializationError(f"reference marker {marker} (a Kryo back reference is not supported)")
        out: dict[str, Any] = {}
        for name, read in fields:
            out[name], pos = read(buf, pos)
        return {n: out[n] for n in self.order}, pos

    def __repr__(self) -> str:
        return f"KryoReader({self.java_class})"
