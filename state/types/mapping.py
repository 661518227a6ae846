"""Type information (PyFlink's ``Types``) and its mapping to Arrow types.

A state's key, namespace and value each have a :class:`TypeInformation`. It names the
Python values it holds, the Arrow type snapshots store them as, and a serializer for
Flink's binary format (see :mod:`flinkstate.state.serializers.lookup`). A ``pyarrow.DataType``
is accepted wherever a type is (:func:`to_type_info`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..errors import InvalidArgumentError, StateTypeError
from .pojo import PojoTypeInfo, pojo
from .typeinfo import (
    _ARRAY_KINDS,
    _ATOMIC_ARROW,
    ArrowTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    RowTypeInfo,
    TypeInformation,
)

__all__ = [
    "ArrowTypeInfo",
    "BasicTypeInfo",
    "ListTypeInfo",
    "MapTypeInfo",
    "PickledBytesTypeInfo",
    "PojoTypeInfo",
    "RowTypeInfo",
    "TypeInformation",
    "Types",
    "as_inferred",
    "char_field",
    "infer_type",
    "is_java_char",
    "to_type_info",
    "type_from_json",
]


def _atomic(name: str) -> BasicTypeInfo:
    return BasicTypeInfo(name)


class Types:
    """Factory of type information, with PyFlink's ``Types`` names."""

    @staticmethod
    def STRING() -> TypeInformation:  # noqa: N802 - PyFlink's names
        return _atomic("STRING")

    @staticmethod
    def CHAR() -> TypeInformation:  # noqa: N802
        return _atomic("CHAR")

    @staticmethod
    def BOOLEAN() -> TypeInformation:  # noqa: N802
        return _atomic("BOOLEAN")

    @staticmethod
    def BYTE() -> TypeInformation:  # noqa: N802
        return _atomic("BYTE")

    @staticmethod
    def SHORT() -> TypeInformation:  # noqa: N802
        return _atomic("SHORT")

    @staticmethod
    def INT() -> TypeInformation:  # noqa: N802
        return _atomic("INT")

    @staticmethod
    def LONG() -> TypeInformation:  # noqa: N802
        return _atomic("LONG")

    @staticmethod
    def FLOAT() -> TypeInformation:  # noqa: N802
        return _atomic("FLOAT")

    @staticmethod
    def DOUBLE() -> TypeInformation:  # noqa: N802
        return _atomic("DOUBLE")

    @staticmethod
    def BIG_DEC() -> TypeInformation:  # noqa: N802
        return _atomic("BIG_DEC")

    @staticmethod
    def SQL_DATE() -> TypeInformation:  # noqa: N802
        return _atomic("SQL_DATE")

    @staticmethod
    def SQL_TIME() -> TypeInformation:  # noqa: N802
        return _atomic("SQL_TIME")

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:  # noqa: N802
        return _atomic("SQL_TIMESTAMP")

    @staticmethod
    def INSTANT() -> TypeInformation:  # noqa: N802
        return _atomic("INSTANT")

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:  # noqa: N802
        return PickledBytesTypeInfo()

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: Any) -> TypeInformation:  # noqa: N802
        return ListTypeInfo(to_type_info(element_type), "PRIMITIVE_ARRAY")

    @staticmethod
    def BASIC_ARRAY(element_type: Any) -> TypeInformation:  # noqa: N802
        return ListTypeInfo(to_type_info(element_type), "BASIC_ARRAY")

    @staticmethod
    def OBJECT_ARRAY(element_type: Any) -> TypeInformation:  # noqa: N802
        return ListTypeInfo(to_type_info(element_type), "OBJECT_ARRAY")

    @staticmethod
    def LIST(element_type_info: Any) -> TypeInformation:  # noqa: N802
        return ListTypeInfo(to_type_info(element_type_info), "LIST")

    @staticmethod
    def MAP(key_type_info: Any, value_type_info: Any) -> TypeInformation:  # noqa: N802
        return MapTypeInfo(to_type_info(key_type_info), to_type_info(value_type_info))

    @staticmethod
    def ROW(field_types: list[Any]) -> TypeInformation:  # noqa: N802
        types = tuple(to_type_info(t) for t in field_types)
        return RowTypeInfo(types, tuple(f"f{i}" for i in range(len(types))))

    @staticmethod
    def ROW_NAMED(field_names: list[str], field_types: list[Any]) -> TypeInformation:  # noqa: N802
        return RowTypeInfo(tuple(to_type_info(t) for t in field_types), tuple(field_names))

    @staticmethod
    def TUPLE(field_types: list[Any]) -> TypeInformation:  # noqa: N802
        types = tuple(to_type_info(t) for t in field_types)
        return RowTypeInfo(types, tuple(f"f{i}" for i in range(len(types))), "TUPLE")

    @staticmethod
    def POJO(  # noqa: N802
        java_class: str, field_names: list[str], field_types: list[Any], hash_fields: list[str] | None = None
    ) -> TypeInformation:
        """A Java POJO (:mod:`.pojo`): its class, fields (put in Flink's order, by name) and the
        fields its ``hashCode()`` covers with ``Objects.hash``, in order (needed to key by it)."""
        return pojo(java_class, field_names, [to_type_info(t) for t in field_types], hash_fields)


#: Arrow has no char type: a string field with this metadata is a Java ``char`` (one UTF-16
#: unit), as a declared ``CHAR`` is held inside a struct (a Kryo class's field, a Row's).
_JAVA_CHAR = {b"flinkstate.java": b"char"}


def char_field(name: str, nullable: bool = True) -> pa.Field:
    """An Arrow field holding a Java ``char`` (``nullable``: a ``Character``)."""
    return pa.field(name, pa.string(), nullable, metadata=_JAVA_CHAR)


def is_java_char(field: pa.Field) -> bool:
    """Whether an Arrow field holds a Java ``char`` (:func:`char_field`)."""
    meta = field.metadata or {}
    return pa.types.is_string(field.type) and meta.get(b"flinkstate.java") == b"char"


def _from_field(field: pa.Field) -> TypeInformation:
    return BasicTypeInfo("CHAR") if is_java_char(field) else _from_arrow(field.type)


_FROM_ARROW: dict[pa.DataType, str] = {
    pa.string(): "STRING",
    pa.large_string(): "STRING",
    pa.bool_(): "BOOLEAN",
    pa.int8(): "BYTE",
    pa.int16(): "SHORT",
    pa.int32(): "INT",
    pa.int64(): "LONG",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.date32(): "SQL_DATE",
}


def to_type_info(value: Any) -> TypeInformation:
    """Return ``value`` as type information; ``pyarrow`` types are mapped."""
    if isinstance(value, TypeInformation):
        return value
    if isinstance(value, pa.DataType):
        return _from_arrow(value)
    raise StateTypeError(
        f"expected a TypeInformation (e.g. Types.LONG()) or a pyarrow.DataType, got {value!r}"
    )


def _from_arrow(t: pa.DataType) -> TypeInformation:
    name = _FROM_ARROW.get(t)
    if name is not None:
        return BasicTypeInfo(name)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return ListTypeInfo(BasicTypeInfo("BYTE"), "PRIMITIVE_ARRAY")
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return ListTypeInfo(_from_field(t.value_field))
    if pa.types.is_map(t):
        return MapTypeInfo(_from_arrow(t.key_type), _from_field(t.item_field))
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        return RowTypeInfo(tuple(_from_field(f) for f in fields), tuple(f.name for f in fields))
    for name, arrow in _ATOMIC_ARROW.items():
        if arrow == t and name not in ("CHAR",):
            return BasicTypeInfo(name)
    return ArrowTypeInfo(t)


def type_from_json(data: dict[str, Any]) -> TypeInformation:
    """Rebuild type information from :meth:`TypeInformation.to_json`."""
    try:
        kind = data["type"]
        if kind in _ATOMIC_ARROW:
            return BasicTypeInfo(kind)
        if kind == "PICKLED_BYTE_ARRAY":
            return PickledBytesTypeInfo()
        if kind in _ARRAY_KINDS:
            return ListTypeInfo(type_from_json(data["element"]), kind)
        if kind == "MAP":
            return MapTypeInfo(type_from_json(data["key"]), type_from_json(data["value"]))
        if kind == "POJO":
            fields = data["fields"]
            return PojoTypeInfo(
                tuple(type_from_json(f) for f in fields),
                tuple(f["name"] for f in fields),
                "ROW",
                data["java_class"],
                None if data.get("hash_fields") is None else tuple(data["hash_fields"]),
            )
        if kind in ("ROW", "TUPLE"):
            fields = data["fields"]
            return RowTypeInfo(
                tuple(type_from_json(f) for f in fields), tuple(f["name"] for f in fields), kind
            )
        if kind == "ARROW":
            schema = pa.ipc.read_schema(pa.py_buffer(bytes.fromhex(data["schema"])))
            return ArrowTypeInfo(schema.field(0).type)
    except (KeyError, TypeError, ValueError, pa.ArrowException) as exc:
        raise InvalidArgumentError(f"malformed type description {data!r}", code="UNSUPPORTED_TYPE") from exc
    raise InvalidArgumentError(f"unknown type {kind!r}", code="UNSUPPORTED_TYPE")


def infer_type(value: Any) -> TypeInformation:
    """The type a key or namespace given without a declared type gets.

    ``bool`` → BOOLEAN (checked before ``int``), ``int`` → LONG, ``str`` → STRING,
    ``float`` → DOUBLE, ``bytes`` → PRIMITIVE_ARRAY(BYTE), ``tuple`` → ROW of the
    inferred field types, named ``f0``, ``f1``, ... whatever the tuple's class: a namedtuple
    or a ``Row`` is the same key as the plain tuple (:mod:`.canonical`), so every subtask
    infers the same type from either.
    """
    if isinstance(value, bool):
        return BasicTypeInfo("BOOLEAN")
    if isinstance(value, int):
        return BasicTypeInfo("LONG")
    if isinstance(value, str):
        return BasicTypeInfo("STRING")
    if isinstance(value, float):
        return BasicTypeInfo("DOUBLE")
    if isinstance(value, (bytes, bytearray)):
        return ListTypeInfo(BasicTypeInfo("BYTE"), "PRIMITIVE_ARRAY")
    if isinstance(value, tuple):
        if any(v is None for v in value):
            raise StateTypeError(
                f"cannot infer a ROW type from {value!r} with None fields: declare the type",
                code="UNSUPPORTED_KEY_TYPE",
            )
        return RowTypeInfo(tuple(infer_type(v) for v in value), tuple(f"f{i}" for i in range(len(value))))
    raise StateTypeError(
        f"cannot infer a type for {type(value).__name__} value {value!r}: declare the type "
        "(e.g. key_type=Types.PICKLED_BYTE_ARRAY())",
        code="UNSUPPORTED_KEY_TYPE",
    )


def as_inferred(t: TypeInformation) -> TypeInformation:
    """The type :func:`infer_type` gives a value of ``t``: rows as ROWs named ``f0``,
    ``f1``, ... (a tuple carries no field names), so ``as_inferred(declared) ==
    infer_type(value)`` says a value fits a declared type the way inference sees it."""
    if not isinstance(t, RowTypeInfo):
        return t
    fields = tuple(as_inferred(f) for f in t.field_types)
    return RowTypeInfo(fields, tuple(f"f{i}" for i in range(len(fields))))
