"""Serializers in Flink's binary formats, one per type.

Keys and values serialize exactly as Flink's built-in serializers write them
(big-endian fixed widths, Flink's variable-length strings, row null masks), so the
same bytes serve stable hashing, the RocksDB backend and Flink savepoints. Values of
immutable types are never copied; mutable ones are copied for copy-on-write.
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import SerializationError
from .atomic import (
    BigDecSerializer,
    BoolSerializer,
    BytesSerializer,
    CharSerializer,
    FloatSerializer,
    IntSerializer,
    PickleSerializer,
    StringSerializer,
    TimeSerializer,
)
from .base import TypeSerializer
from .composite import ArrowSerializer, ListSerializer, MapSerializer, PojoSerializer, RowSerializer

__all__ = ["TypeSerializer", "serializer_for"]
from ..types.mapping import (
    ArrowTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    PojoTypeInfo,
    RowTypeInfo,
    TypeInformation,
)

_FIXED = {"BYTE": ">b", "SHORT": ">h", "INT": ">i", "LONG": ">q", "FLOAT": ">f", "DOUBLE": ">d"}


@lru_cache(maxsize=512)
def serializer_for(type_info: TypeInformation) -> TypeSerializer:
    """The (cached) serializer of ``type_info``."""
    if isinstance(type_info, BasicTypeInfo):
        name = type_info.name
        if name in ("BYTE", "SHORT", "INT", "LONG"):
            return IntSerializer(_FIXED[name])
        if name in _FIXED:
            return FloatSerializer(_FIXED[name])
        if name == "BOOLEAN":
            return BoolSerializer()
        if name == "CHAR":
            return CharSerializer()
        if name == "STRING":
            return StringSerializer()
        if name == "BIG_DEC":
            return BigDecSerializer()
        return TimeSerializer(name)
    if isinstance(type_info, PickledBytesTypeInfo):
        return PickleSerializer()
    if isinstance(type_info, ListTypeInfo):
        if type_info.is_bytes:
            return BytesSerializer()
        if type_info.kind not in ("BASIC_ARRAY", "OBJECT_ARRAY"):
            return ListSerializer(serializer_for(type_info.element), "none")
        if type_info.element == BasicTypeInfo("STRING"):
            # Flink serializes String[] (BASIC_ARRAY and OBJECT_ARRAY of STRING alike) with
            # StringArraySerializer: no null flags, a null string is the length varint 0.
            return ListSerializer(StringSerializer(nullable=True), "inline")
        return ListSerializer(serializer_for(type_info.element), "flag")
    if isinstance(type_info, MapTypeInfo):
        return MapSerializer(serializer_for(type_info.key), serializer_for(type_info.value))
    if isinstance(type_info, PojoTypeInfo):
        return PojoSerializer(tuple(serializer_for(t) for t in type_info.field_types), type_info.java_class)
    if isinstance(type_info, RowTypeInfo):
        fields = tuple(serializer_for(t) for t in type_info.field_types)
        return RowSerializer(fields, type_info.kind == "ROW")
    if isinstance(type_info, ArrowTypeInfo):
        return ArrowSerializer(type_info.arrow_type)
    raise SerializationError(f"no serializer for {type_info!r}")
