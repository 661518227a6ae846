"""Decoders for Flink value layouts our own serializers do not write: TTL wrappers and raw
bytes (Kryo and unknown serializers). They only read."""

from __future__ import annotations

import struct
from typing import Any

from flinkstate.state.errors import SerializationError
from flinkstate.state.serializers.base import TypeSerializer

from .flink_type import FlinkType

_LONG = struct.Struct(">q")
GLOBAL_WINDOW = "GlobalWindow"


class _ReadOnly(TypeSerializer):
    def write(self, value: Any, out: bytearray) -> None:
        raise SerializationError(f"{self} only reads Flink savepoints")


class RawSerializer(_ReadOnly):
    """The remaining bytes of a value, undecoded (Kryo, unknown serializers)."""

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        return bytes(buf[pos:]), len(buf)


class TtlValueSerializer(_ReadOnly):
    """Flink's TTL wrapper: the last-access timestamp (long), then the user value.
    Reads ``(value, timestamp)``."""

    def __init__(self, inner: FlinkType) -> None:
        if inner.serializer is None:
            raise SerializationError(f"TTL state of {inner.describe()} has no decoder")
        self._inner = inner.serializer

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        (ts,) = _LONG.unpack_from(buf, pos)
        value, pos = self._inner.read(buf, pos + 8)
        return (value, ts), pos


class GlobalWindowSerializer(_ReadOnly):
    """Flink's ``GlobalWindow.Serializer``: one 0 byte for the one global window, read as the
    string ``"GlobalWindow"`` (its Java ``toString``)."""

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        if buf[pos] != 0:
            raise SerializationError(f"global window byte {buf[pos]}, not 0")
        return GLOBAL_WINDOW, pos + 1
