"""Serializers of composite types in Flink's formats: lists and arrays, maps, rows, other Arrow types."""

from __future__ import annotations

import copy as _copy
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from ..errors import SerializationError
from .atomic import BytesSerializer
from .base import INT32, TypeSerializer, as_sequence, read_size, take


class ListSerializer(TypeSerializer):
    """int size, then the elements.

    ``nulls`` says how a ``None`` element is written: ``"none"`` (refused: LIST,
    PRIMITIVE_ARRAY), ``"flag"`` (a bool before each element, Flink's GenericArraySerializer
    for BASIC/OBJECT_ARRAY) or ``"inline"`` (the element serializer writes it: Flink's
    StringArraySerializer for arrays of STRING).
    """

    immutable = False

    def __init__(self, element: TypeSerializer, nulls: str) -> None:
        self._element = element
        self._nulls = nulls

    def write(self, value: Any, out: bytearray) -> None:
        value = as_sequence(value, "a list")
        out += INT32.pack(len(value))
        element = self._element
        flagged = self._nulls == "flag"
        for item in value:
            if flagged:
                out.append(0 if item is None else 1)
                if item is None:
                    continue
            elif item is None and self._nulls == "none":
                raise SerializationError("a list element is None; this type does not allow nulls")
            element.write(item, out)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        flagged = self._nulls == "flag"
        n, pos = read_size(buf, pos, "list", 1 if flagged else self._element.min_width)
        result: list[Any] = []
        for _ in range(n):
            if flagged:
                pos += 1
                if buf[pos - 1] == 0:
                    result.append(None)
                    continue
            item, pos = self._element.read(buf, pos)
            result.append(item)
        return result, pos

    def copy(self, value: Any) -> Any:
        if self._element.immutable:
            return list(value)
        copy = self._element.copy
        return [None if v is None else copy(v) for v in value]


class MapSerializer(TypeSerializer):
    """int size, then per entry: key, bool is-null, value."""

    immutable = False

    def __init__(self, key: TypeSerializer, value: TypeSerializer) -> None:
        self._key = key
        self._value = value

    def write(self, value: Any, out: bytearray) -> None:
        if not isinstance(value, Mapping):
            raise SerializationError(f"expected a dict, got {type(value).__name__} {value!r}")
        out += INT32.pack(len(value))
        for k, v in value.items():
            self._key.write(k, out)
            out.append(1 if v is None else 0)
            if v is not None:
                self._value.write(v, out)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        n, pos = read_size(buf, pos, "map", self._key.min_width + 1)
        result: dict[Any, Any] = {}
        for _ in range(n):
            k, pos = self._key.read(buf, pos)
            pos += 1
            if buf[pos - 1]:
                result[k] = None
            else:
                result[k], pos = self._value.read(buf, pos)
        return result, pos

    def copy(self, value: Any) -> Any:
        if self._key.immutable and self._value.immutable:
            return dict(value)
        copy_key, copy_value = self._key.copy, self._value.copy
        return {copy_key(k): None if v is None else copy_value(v) for k, v in value.items()}


class RowSerializer(TypeSerializer):
    """ROW: a null mask (2 row-kind bits, one bit per field, MSB first), then the fields.

    TUPLE: the fields in order, no mask, no nulls.
    """

    def __init__(self, fields: tuple[TypeSerializer, ...], masked: bool) -> None:
        self._fields = fields
        self._masked = masked
        self.immutable = all(f.immutable for f in fields)
        self._mask_len = (len(fields) + 2 + 7) // 8
        self.min_width = self._mask_len if masked else sum(f.min_width for f in fields)

    def write(self, value: Any, out: bytearray) -> None:
        value = as_sequence(value, "a row")
        if len(value) != len(self._fields):
            raise SerializationError(f"expected {len(self._fields)} fields, got {len(value)}")
        if self._masked:
            mask = 0
            for i, v in enumerate(value):
                if v is None:
                    mask |= 1 << (self._mask_len * 8 - 3 - i)
            out += mask.to_bytes(self._mask_len, "big")
        for field, v in zip(self._fields, value, strict=False):
            if v is None:
                if not self._masked:
                    raise SerializationError("a TUPLE field is None; tuples do not allow nulls")
                continue
            field.write(v, out)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        mask = 0
        if self._masked:
            raw, pos = take(buf, pos, self._mask_len, "row null mask")
            mask = int.from_bytes(raw, "big")
        values: list[Any] = []
        for i, field in enumerate(self._fields):
            if mask >> (self._mask_len * 8 - 3 - i) & 1:
                values.append(None)
            else:
                v, pos = field.read(buf, pos)
                values.append(v)
        return tuple(values), pos

    def copy(self, value: Any) -> Any:
        if self.immutable:
            return value
        return tuple(None if v is None else f.copy(v) for f, v in zip(self._fields, value, strict=False))


class PojoSerializer(TypeSerializer):
    """Flink's PojoSerializer of a POJO without subclasses: a flags byte (1: null, 2: exactly the
    declared class), then per field a null flag byte and, unless null, the field."""

    _NULL = 1
    _EXACT_CLASS = 2

    def __init__(self, fields: tuple[TypeSerializer, ...], java_class: str) -> None:
        self._fields = fields
        self._class = java_class
        self.immutable = all(f.immutable for f in fields)

    def write(self, value: Any, out: bytearray) -> None:
        if value is None:
            out.append(self._NULL)
            return
        value = as_sequence(value, f"a POJO {self._class}")
        if len(value) != len(self._fields):
            raise SerializationError(
                f"POJO {self._class}: expected {len(self._fields)} fields, got {len(value)}"
            )
        out.append(self._EXACT_CLASS)
        for field, v in zip(self._fields, value, strict=True):
            out.append(1 if v is None else 0)
            if v is not None:
                field.write(v, out)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        flags, pos = take(buf, pos, 1, f"POJO {self._class} flags")
        if flags[0] & self._NULL:
            return None, pos
        if flags[0] != self._EXACT_CLASS:
            raise SerializationError(f"POJO {self._class}: subclass flags {flags[0]} are not supported")
        values: list[Any] = []
        for field in self._fields:
            is_null, pos = take(buf, pos, 1, f"POJO {self._class} null flag")
            if is_null[0]:
                values.append(None)
            else:
                v, pos = field.read(buf, pos)
                values.append(v)
        return tuple(values), pos

    def copy(self, value: Any) -> Any:
        if self.immutable or value is None:
            return value
        return tuple(None if v is None else f.copy(v) for f, v in zip(self._fields, value, strict=False))

    def __repr__(self) -> str:
        return f"PojoSerializer({self._class})"


class ArrowSerializer(BytesSerializer):
    """Any other Arrow type: a one-row Arrow IPC stream, framed as ``byte[]``."""

    immutable = False

    def __init__(self, arrow_type: pa.DataType) -> None:
        self._schema = pa.schema([pa.field("v", arrow_type)])

    def write(self, value: Any, out: bytearray) -> None:
        batch = pa.record_batch([pa.array([value], self._schema.field(0).type)], schema=self._schema)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self._schema) as writer:
            writer.write_batch(batch)
        super().write(sink.getvalue().to_pybytes(), out)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        data, pos = super().read(buf, pos)
        table = pa.ipc.open_stream(data).read_all()
        return table.column(0)[0].as_py(), pos

    def copy(self, value: Any) -> Any:
        return _copy.deepcopy(value)
