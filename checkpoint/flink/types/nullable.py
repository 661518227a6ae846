"""Flink's ``NullableSerializer`` and the POJO collection fields of Flink 2.x.

``NullableSerializer`` writes a boolean (1: null) before the value; a null is followed by
``padding`` zero bytes (0 for the serializers Flink wraps itself). Its snapshot
(``NullableSerializerSnapshot``, outer version 2) holds the padding length, then the wrapped
serializer's snapshot. Flink 2.x's type extraction gives a POJO's ``List<T>`` field
``Nullable(List(Nullable(T)))`` (Flink 1.x: a Kryo ``GenericType``; checked against the POJO
snapshot Flink 2.3.0 writes for ``tests/fixtures/flink/MigrateJob.java``), which
:func:`flink2_list_field` builds.
"""

from __future__ import annotations

from typing import Any

from flinkstate.state.errors import SerializationError
from flinkstate.state.serializers.base import TypeSerializer
from flinkstate.state.serializers.composite import ListSerializer


class NullableSerializer(TypeSerializer):
    """A null flag byte, then the value (or, null, ``padding`` zero bytes)."""

    def __init__(self, inner: TypeSerializer, padding: int = 0) -> None:
        self.inner = inner
        self.padding = padding
        self.immutable = inner.immutable

    def write(self, value: Any, out: bytearray) -> None:
        if value is None:
            out.append(1)
            out += bytes(self.padding)
            return
        out.append(0)
        self.inner.write(value, out)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        flag = buf[pos]
        if flag > 1:
            raise SerializationError(f"null flag {flag} of a NullableSerializer")
        if flag:
            return None, pos + 1 + self.padding
        return self.inner.read(buf, pos + 1)

    def copy(self, value: Any) -> Any:
        return None if value is None else self.inner.copy(value)

    def __repr__(self) -> str:
        return f"Nullable({self.inner!r})"


def flink2_list_field(element: TypeSerializer) -> TypeSerializer:
    """The serializer Flink 2.x gives a POJO's ``List`` field of elements ``element``."""
    return NullableSerializer(ListSerializer(NullableSerializer(element), "inline"))
