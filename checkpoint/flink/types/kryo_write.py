"""Kryo-serialized values encoded from a declared struct: the inverse of :mod:`.kryo_read`.

:class:`KryoWriter` writes what Flink's ``KryoSerializer`` writes for one class, with Kryo 5
(Flink 2.x) or Kryo 2 (Flink 1.x): the class header (the registration id, or the class name, as
the state's own values carry it: Kryo's registrations live in the serializer snapshot, which
the writer carries as read), the reference marker of a new object, then the declared fields
sorted by name, each as :mod:`.kryo_read` reads it (``short``, ``char``, ``float`` and
``double`` little-endian in Kryo 5, big-endian in Kryo 2). Strings are ``Output.writeString``: an ASCII
run for 2 to 32 ASCII chars (Kryo 2: 2 to 63), else a flagged varint of char count + 1 and the
UTF-16 code units in Kryo's UTF-8 (one byte up to 0x7F, two up to 0x7FF, else three; astral
chars as two surrogates).

:func:`class_header` takes the class header from a value's bytes; :func:`state_class_header`
the one header all values of a state share (a state holding none, or values of several
classes, has no header the writer can know: ``[FLINK_UNSUPPORTED]``). How a Kryo state of a
Flink savepoint read with its declaration is set from rows: ``writer.flink_source.kryo_spec``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa

from flinkstate.state.errors import SerializationError
from flinkstate.state.serializers.base import TypeSerializer

from ..errors import UnsupportedFlinkWriteError
from .kryo_lists import Names, is_collection, list_writer
from .kryo_read import (
    FIXED,
    FIXED_KRYO2,
    KRYO_VERSIONS,
    KryoReader,
    encoding,
    java_order,
    kryo_string,
    varint,
)

Write = Callable[[Any, bytearray], None]
_NEW_OBJECT = b"\x01"  # Kryo's reference marker of an object not seen before
#: The lengths of ASCII strings Kryo writes as an ASCII run, by Kryo version.
_ASCII_RUN = {5: range(2, 33), 2: range(2, 64)}


def uvarint(v: int, out: bytearray, max_bytes: int) -> None:
    """Kryo's unsigned varint (the 9th byte of a long holds 8 bits)."""
    for i in range(max_bytes):
        if i == 8:
            out.append(v & 0xFF)
            return
        if v < 0x80:
            out.append(v)
            return
        out.append(v & 0x7F | 0x80)
        v >>= 7
    raise SerializationError(f"{v} does not fit a {max_bytes}-byte varint")


def _zigzag(bits: int) -> Write:
    low, high, width = -(1 << (bits - 1)), (1 << (bits - 1)) - 1, 5 if bits == 32 else 9

    def write(v: Any, out: bytearray) -> None:
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            raise SerializationError(f"{v!r} is not a {bits}-bit integer")
        uvarint(((v << 1) ^ (v >> (bits - 1))) & ((1 << bits) - 1), out, width)

    return write


def write_string(s: str, out: bytearray, kryo: int) -> None:
    """Kryo ``kryo``'s ``Output.writeString`` of a non-null string."""
    if not isinstance(s, str):
        raise SerializationError(f"{s!r} is not a string")
    raw = s.encode("utf-16-be", "surrogatepass")
    units = struct.unpack(f">{len(raw) // 2}H", raw)
    if len(units) in _ASCII_RUN[kryo] and all(u < 0x80 for u in units):
        out += bytes(units[:-1])
        out.append(units[-1] | 0x80)
        return
    n = len(units) + 1
    out.append(0x80 | n & 0x3F | (0x40 if n > 0x3F else 0))
    if n > 0x3F:
        uvarint(n >> 6, out, 4)
    for u in units:
        if u < 0x80:
            out.append(u)
        elif u < 0x800:
            out += bytes((0xC0 | u >> 6, 0x80 | u & 0x3F))
        else:
            out += bytes((0xE0 | u >> 12, 0x80 | u >> 6 & 0x3F, 0x80 | u & 0x3F))


def _fixed(name: str, table: Mapping[str, struct.Struct]) -> Write:
    s = table[name]
    kinds = (int, float) if name in ("float", "double") else (int,)

    def write(v: Any, out: bytearray) -> None:
        if isinstance(v, bool) or not isinstance(v, kinds):
            raise SerializationError(f"{v!r} is not a {name}")
        try:
            out += s.pack(v)
        except (struct.error, OverflowError) as exc:
            raise SerializationError(f"{v!r} does not fit a {name}: {exc}") from exc

    return write


def _char(s: struct.Struct) -> Write:
    def write(v: Any, out: bytearray) -> None:
        if not isinstance(v, str) or len(v) != 1 or ord(v) > 0xFFFF or 0xD800 <= ord(v) <= 0xDFFF:
            raise SerializationError(f"{v!r} is not a char (one UTF-16 unit, not a surrogate)")
        out += s.pack(ord(v))

    return write


def _boolean(v: Any, out: bytearray) -> None:
    if not isinstance(v, bool):
        raise SerializationError(f"{v!r} is not a boolean")
    out.append(1 if v else 0)


def _writers(kryo: int, fixed: Mapping[str, struct.Struct]) -> dict[str, Write]:
    return {
        "long": _zigzag(64),
        "int": _zigzag(32),
        "boolean": _boolean,
        "string": lambda v, out: write_string(v, out, kryo),
        **{name: _char(s) if name == "char" else _fixed(name, fixed) for name, s in fixed.items()},
    }


#: Field writers by Kryo version.
_WRITE: dict[int, dict[str, Write]] = {5: _writers(5, FIXED), 2: _writers(2, FIXED_KRYO2)}


def _field_writer(field: pa.Field, kryo: int, names: Names) -> Write:
    if is_collection(field.type):
        element = encoding(field.type.value_field) or ""  # the reader refused other elements first
        return list_writer(
            kryo,
            names,
            lambda v, out: uvarint(v, out, 5),
            lambda v, out: write_string(v, out, kryo),
            element,
            _WRITE[kryo][element],
        )
    name = encoding(field)
    if name is None:
        raise SerializationError(
            f"type {field.type} has no Kryo field encoding"
        )  # the reader refused it first
    inner = _WRITE[kryo][name]
    if name == "string" or field.nullable:

        def nullable(v: Any, out: bytearray) -> None:
            if v is None:
                out.append(0)
                return
            out.append(1)
            inner(v, out)

        return nullable

    def not_null(v: Any, out: bytearray) -> None:
        if v is None:
            raise SerializationError(f"field {field.name} is NOT NULL (a Java primitive)")
        inner(v, out)

    return not_null


class KryoWriter(TypeSerializer):
    """Writes (and reads) one declared Kryo class's values, dicts of the declared fields, with
    Kryo ``kryo`` (2: Flink 1.x, 5: 2.x); ``header``: the class header bytes the state's values
    carry (:func:`state_class_header`)."""

    def __init__(self, declared: pa.DataType, java_class: str, header: bytes, what: str, kryo: int) -> None:
        if kryo not in KRYO_VERSIONS:
            raise SerializationError(f"{what}: Kryo version {kryo} (known: 2 and 5)")
        self.reader = KryoReader(declared, java_class, what, kryo)  # checks the declaration
        fields = [declared.field(i) for i in range(declared.num_fields)]
        self._names = Names()  # the class names of the value being written, by name id
        self.fields = [(f.name, _field_writer(f, kryo, self._names)) for f in java_order(fields)]
        self.header = header + _NEW_OBJECT
        self.java_class = java_class
        self._own_name = java_class if header[:1] == b"\x01" else None  # the header names the class

    def write(self, value: Any, out: bytearray) -> None:
        if value is None:
            out.append(0)  # Kryo's null object
            return
        if not isinstance(value, Mapping):
            raise SerializationError(f"{value!r} is not a {self.java_class} (a dict of its fields)")
        out += self.header
        self._names.reset(self._own_name)
        for name, write in self.fields:
            if name not in value:
                raise SerializationError(f"{value!r} lacks field {name} of {self.java_class}")
            write(value[name], out)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        return self.reader.read(buf, pos)

    def __repr__(self) -> str:
        return f"KryoWriter({self.java_class})"


def class_header(data: bytes, pos: int) -> bytes | None:
    """The class header of the Kryo value at ``pos`` (None: a null object)."""
    start = pos
    class_id, pos = varint(data, pos, 5)
    if class_id == 0:
        return None
    if class_id == 1:  # an unregistered class: its name id and name
        _, pos = varint(data, pos, 5)
        _, pos = kryo_string(data, pos)
    return bytes(data[start:pos])


def state_class_header(values: Iterable[bytes], kind: str, ttl: bool, java_class: str, what: str) -> bytes:
    """The one class header of a state's value bytes (as a keyed state's entries hold them:
    a map value after its null flag, a list's first element, after a TTL timestamp)."""
    skip = 8 if ttl else 0
    found: set[bytes] = set()
    for data in values:
        pos = skip
        if kind == "MAP":
            if data[0] == 1:  # a null map value
                continue
            pos += 1
        if kind == "LIST" and not data:
            continue
        try:
            header = class_header(data, pos)
        except (SerializationError, IndexError) as exc:
            raise UnsupportedFlinkWriteError(f"{what}: a value is not Kryo's ({exc})") from exc
        if header is not None:
            found.add(header)
    if len(found) != 1:
        why = "holds no value to take it from" if not found else f"holds values of {len(found)} classes"
        raise UnsupportedFlinkWriteError(
            f"{what}: the Kryo class header of {java_class} is unknown (the state {why}), so its values "
            "cannot be written"
        )
    return found.pop()
