"""A reader of Java object serialization streams (``ObjectOutputStream``), for the few
objects Flink stores that way in serializer snapshots (SQL ``LogicalType`` s).

Objects read as dicts of their serializable fields plus ``"@class"`` (the class name);
enum constants as their name; strings as ``str``; arrays as lists. Custom ``writeObject``
data and class annotations are read and skipped (objects inside them are parsed). It
never instantiates anything: the stream is only parsed.
"""

from __future__ import annotations

import struct
from typing import Any

from .data_read import Cursor

_MAGIC = 0xACED0005
_NULL, _REFERENCE, _CLASSDESC, _OBJECT, _STRING, _ARRAY = 0x70, 0x71, 0x72, 0x73, 0x74, 0x75
_END_BLOCK, _BLOCK, _LONG_STRING, _BLOCK_LONG, _ENUM = 0x78, 0x77, 0x7C, 0x7A, 0x7E
_BASE_HANDLE = 0x7E0000
_WRITE_METHOD, _SERIALIZABLE, _EXTERNALIZABLE, _BLOCK_DATA = 0x01, 0x02, 0x04, 0x08
_PRIMITIVES = {
    "B": struct.Struct(">b"), "C": struct.Struct(">H"), "D": struct.Struct(">d"), "F": struct.Struct(">f"),
    "I": struct.Struct(">i"), "J": struct.Struct(">q"), "S": struct.Struct(">h"), "Z": struct.Struct(">?"),
}  # fmt: skip


class _ClassDesc:
    __slots__ = ("fields", "flags", "name", "parent")

    def __init__(self, name: str) -> None:
        self.name = name
        self.flags = 0
        self.fields: list[tuple[str, str]] = []
        self.parent: _ClassDesc | None = None

    def chain(self) -> list[_ClassDesc]:
        """This class and its serializable superclasses, the topmost first."""
        out: list[_ClassDesc] = []
        d: _ClassDesc | None = self
        while d is not None:
            out.append(d)
            d = d.parent
        return out[::-1]


class JavaStreamReader:
    """Reads one stream (magic, version, one object) from a cursor, advancing it."""

    def __init__(self, c: Cursor, what: str) -> None:
        self.c = c
        self.what = what
        self.handles: list[Any] = []

    def read(self) -> Any:
        at = self.c.pos
        if self.c.i32(f"{self.what} Java stream magic") & 0xFFFFFFFF != _MAGIC:
            raise self.c.fail(f"{self.what}: not a Java serialization stream", at)
        return self.content()

    def _new_handle(self, value: Any) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def _string(self, tag: int) -> str:
        if tag == _STRING:
            text = self.c.utf(f"{self.what} string")
        else:
            n = self.c.i64(f"{self.what} long string length")
            text = self.c.take(n, f"{self.what} long string").decode("utf-8", "surrogatepass")
        self._new_handle(text)
        return text

    def content(self) -> Any:
        at = self.c.pos
        tag = self.c.u8(f"{self.what} Java stream tag")
        if tag == _NULL:
            return None
        if tag == _REFERENCE:
            handle = self.c.i32(f"{self.what} reference") - _BASE_HANDLE
            if not 0 <= handle < len(self.handles):
                raise self.c.fail(f"{self.what}: bad back reference {handle}", at)
            return self.handles[handle]
        if tag in (_STRING, _LONG_STRING):
            return self._string(tag)
        if tag == _CLASSDESC:
            self.c.pos = at
            return self._class_desc()
        if tag == _ENUM:
            self._class_desc()
            slot = self._new_handle(None)
            name = self.content()
            self.handles[slot] = name
            return name
        if tag == _OBJECT:
            return self._object()
        if tag == _ARRAY:
            return self._array()
        if tag in (_BLOCK, _BLOCK_LONG):
            n = self.c.u8("block length") if tag == _BLOCK else self.c.count("block length")
            self.c.take(n, f"{self.what} block data")
            return None
        raise self.c.fail(f"{self.what}: unsupported Java serialization tag {tag:#x}", at)

    def _class_desc(self) -> _ClassDesc | None:
        at = self.c.pos
        tag = self.c.u8(f"{self.what} class descriptor tag")
        if tag == _NULL:
            return None
        if tag == _REFERENCE:
            self.c.pos = at
            found = self.content()
            if not isinstance(found, _ClassDesc):
                raise self.c.fail(f"{self.what}: a reference that is not a class descriptor", at)
            return found
        if tag != _CLASSDESC:
            raise self.c.fail(f"{self.what}: expected a class descriptor, got tag {tag:#x}", at)
        desc = _ClassDesc(self.c.utf(f"{self.what} class name"))
        self.c.i64(f"{self.what} serialVersionUID")
        self._new_handle(desc)
        desc.flags = self.c.u8(f"{self.what} class flags")
        for _ in range(self.c.u16(f"{self.what} field count")):
            code = chr(self.c.u8(f"{self.what} field type"))
            name = self.c.utf(f"{self.what} field name")
            if code in "L[":
                self.content()  # the field's class name, a string
            elif code not in _PRIMITIVES:
                raise self.c.fail(f"{self.what}: field {name} has type code {code!r}")
            desc.fields.append((name, code))
        self._annotations()
        desc.parent = self._class_desc()
        return desc

    def _annotations(self) -> None:
        while self.c.buf[self.c.pos : self.c.pos + 1] != bytes([_END_BLOCK]):
            self.content()
        self.c.pos += 1

    def _field(self, code: str) -> Any:
        if code in "L[":
            return self.content()
        s = _PRIMITIVES[code]
        return s.unpack(self.c.take(s.size, f"{self.what} field"))[0]

    def _object(self) -> dict[str, Any]:
        desc = self._class_desc()
        if desc is None:
            raise self.c.fail(f"{self.what}: an object without a class")
        out: dict[str, Any] = {"@class": desc.name}
        self._new_handle(out)
        for d in desc.chain():
            if d.flags & _EXTERNALIZABLE:
                if not d.flags & _BLOCK_DATA:
                    raise self.c.fail(f"{self.what}: externalizable {d.name} without block data")
                self._annotations()
                continue
            for name, code in d.fields:
                out[name] = self._field(code)
            if d.flags & _WRITE_METHOD:
                self._annotations()
        return out

    def _array(self) -> list[Any]:
        desc = self._class_desc()
        if desc is None or not desc.name.startswith("["):
            raise self.c.fail(f"{self.what}: an array without an array class")
        out: list[Any] = []
        self._new_handle(out)
        code = desc.name[1]
        for _ in range(self.c.count(f"{self.what} array length", 0)):
            out.append(self._field(code))
        return out
