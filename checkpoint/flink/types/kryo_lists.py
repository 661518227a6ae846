"""Collection fields of a declared Kryo class (``ARRAY<T>``): Kryo's ``CollectionSerializer``.

A ``List<T>`` field of a class Kryo writes with ``FieldSerializer`` is written, in Kryo 2 (Flink
1.x) and Kryo 5 (2.x) alike, as ``writeClassAndObject``: the class (0: a null list; 1, a name
id, then the class name the first time that name id is given in the value:
``java.util.ArrayList``), the reference marker of a new object (1), the size, then the elements
(the field's generic type spares their class). The size differs: Kryo 2 writes ``n`` as a
varint; Kryo 5 writes ``n + 1`` as a "flag varint" (the first byte: bit 7 set when an element
is null, bit 6 when more bytes follow, 6 bits of the value; then a varint of the rest). Before
each element a marker (0: null, 1: a value): always in Kryo 2; in Kryo 5 only where an element
is null or the element class uses references (String does, the boxed primitives do not). Each
element is then written as the field of its type would be. Checked against the bytes of Flink
1.20.5 and 2.3.0 for ``List<String>``, ``List<Long>`` and ``List<Double>``
(``tests/fixtures/flink/MigrateJob.java``); ``List<Integer>`` follows Long's rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flinkstate.state.errors import SerializationError

from ..errors import DeclaredTypeError

Read = Callable[[bytes, int], tuple[Any, int]]
Write = Callable[[Any, bytearray], None]
#: The collection classes a declared ``ARRAY<STRING>`` field reads and writes.
COLLECTION = "java.util.ArrayList"


class Names:
    """The class names of one Kryo value by name id (Kryo numbers them afresh in every value)."""

    def __init__(self) -> None:
        self.by_id: dict[int, str] = {}

    def reset(self, first: str | None = None) -> None:
        """A new value; ``first``: the name its own class header gave name id 0."""
        self.by_id = {} if first is None else {0: first}


#: The declared element types of a collection field: the Kryo encoding of each.
ELEMENTS = {"string": "STRING", "long": "BIGINT", "int": "INT", "double": "DOUBLE"}


def is_collection(t: pa.DataType) -> bool:
    """Whether a declared field type is a Kryo collection field."""
    return bool(pa.types.is_list(t))


def check_collection(field: pa.Field, element: str | None, what: str) -> str:
    """The element encoding of a collection field (refused where the elements are not read)."""
    if element not in ELEMENTS:
        raise DeclaredTypeError(
            f"{what}: field {field.name} of type {field.type}: a Kryo collection field is declared "
            f"ARRAY<{'|'.join(ELEMENTS.values())}> (a {COLLECTION} of String, Long, Integer or "
            "Double); other element types are not read yet"
        )
    return element


def marked(inner: Read) -> Read:
    """An element after its marker (0: null, 1: a value)."""

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        flag = buf[pos]
        if flag > 1:
            raise SerializationError(f"element marker {flag} (a Kryo back reference is not supported)")
        return inner(buf, pos + 1) if flag else (None, pos + 1)

    return read


def field_elements(kryo: int, element: str, inner: Read) -> Callable[[bool], Read]:
    """The reader of a collection field's elements, by whether the size flags a null."""
    always = kryo == 2 or element == "string"
    plain, with_marker = inner, marked(inner)
    return lambda has_null: with_marker if always or has_null else plain


def list_reader(kryo: int, names: Names, varint: Read, string: Read, element: Callable[[bool], Read]) -> Read:
    """The reader of a Kryo ``ArrayList`` with Kryo ``kryo``'s encodings (``string``: its class
    name's), its elements read by ``element(has_null)``."""

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        class_id, pos = varint(buf, pos)
        if class_id == 0:
            return None, pos
        if class_id != 1:
            raise SerializationError(f"collection class id {class_id - 2} (a registered class is not read)")
        name_id, pos = varint(buf, pos)
        if name_id not in names.by_id:
            names.by_id[name_id], pos = string(buf, pos)
        if names.by_id[name_id] != COLLECTION:
            raise SerializationError(f"collection class {names.by_id[name_id]}, not {COLLECTION}")
        marker, pos = varint(buf, pos)
        if marker != 1:
            raise SerializationError(f"reference marker {marker} (a Kryo back reference is not supported)")
        has_null = False
        if kryo == 2:
            size, pos = varint(buf, pos)
        else:
            first = buf[pos]
            size, pos, has_null = first & 0x3F, pos + 1, bool(first & 0x80)
            if first & 0x40:
                rest, pos = varint(buf, pos)
                size |= rest << 6
            if size == 0:
                raise SerializationError("a null collection after its class header")
            size -= 1
        read_element = element(has_null)
        out: list[Any] = []
        for _ in range(size):
            item, pos = read_element(buf, pos)
            out.append(item)
        return out, pos

    return read


def list_writer(
    kryo: int,
    names: Names,
    uvarint: Callable[[int, bytearray], None],
    string: Write,
    element: str,
    inner: Write,
) -> Write:
    """The writer of a collection field of ``element`` s (each written by ``inner``) with Kryo
    ``kryo``'s encodings (``string``: its class name's)."""
    always = kryo == 2 or element == "string"

    def write(v: Any, out: bytearray) -> None:
        if v is None:
            out.append(0)
            return
        if isinstance(v, (str, bytes, dict)) or not hasattr(v, "__iter__"):
            raise SerializationError(f"{v!r} is not a list")
        items = list(v)
        out.append(1)
        known = next((i for i, n in names.by_id.items() if n == COLLECTION), None)
        if known is not None:
            uvarint(known, out)
        else:
            name_id = len(names.by_id)
            names.by_id[name_id] = COLLECTION
            uvarint(name_id, out)
            string(COLLECTION, out)
        out.append(1)  # a new object
        has_null = any(item is None for item in items)
        if kryo == 2:
            uvarint(len(items), out)
        else:
            n = len(items) + 1
            out.append((0x80 if has_null else 0) | (0x40 if n > 0x3F else 0) | n & 0x3F)
            if n > 0x3F:
                uvarint(n >> 6, out)
        for item in items:
            if item is None:
                out.append(0)
                continue
            if always or has_null:
                out.append(1)
            inner(item, out)

    return write
