"""The type information classes: what values a key, namespace or state holds.

Each names the Python values it holds and the Arrow type snapshots store them as;
:mod:`flinkstate.state.serializers.lookup` has a serializer for each. Build them with
:class:`flinkstate.state.types.mapping.Types`.
"""

from __future__ import annotations

import datetime
import decimal
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import InvalidArgumentError, StateTypeError

_ATOMIC_ARROW: dict[str, pa.DataType] = {
    "STRING": pa.string(),
    "CHAR": pa.string(),
    "BOOLEAN": pa.bool_(),
    "BYTE": pa.int8(),
    "SHORT": pa.int16(),
    "INT": pa.int32(),
    "LONG": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "BIG_DEC": pa.decimal128(38, 18),
    "SQL_DATE": pa.date32(),
    "SQL_TIME": pa.time32("ms"),
    "SQL_TIMESTAMP": pa.timestamp("us"),
    "INSTANT": pa.timestamp("us", tz="UTC"),
}

_ATOMIC_PYTHON: dict[str, type] = {
    "STRING": str,
    "CHAR": str,
    "BOOLEAN": bool,
    "BYTE": int,
    "SHORT": int,
    "INT": int,
    "LONG": int,
    "FLOAT": float,
    "DOUBLE": float,
    "BIG_DEC": decimal.Decimal,
    "SQL_DATE": datetime.date,
    "SQL_TIME": datetime.time,
    "SQL_TIMESTAMP": datetime.datetime,
    "INSTANT": datetime.datetime,
}

_ARRAY_KINDS = ("LIST", "PRIMITIVE_ARRAY", "BASIC_ARRAY", "OBJECT_ARRAY")

# Flink's PrimitiveArrayTypeInfo / BasicArrayTypeInfo element types (Types.PRIMITIVE_ARRAY,
# Types.BASIC_ARRAY refuse every other element type).
_PRIMITIVE_ELEMENTS = frozenset(("BOOLEAN", "BYTE", "SHORT", "INT", "LONG", "FLOAT", "DOUBLE", "CHAR"))
_BASIC_ARRAY_ELEMENTS = _PRIMITIVE_ELEMENTS | {"STRING"}


def _check_component(value: Any, what: str) -> None:
    if not isinstance(value, TypeInformation):
        raise StateTypeError(
            f"{what} must be a TypeInformation (e.g. Types.LONG()), got {value!r}",
            code="UNSUPPORTED_TYPE",
        )


class TypeInformation(ABC):
    """The type of a key, namespace, value or element."""

    @abstractmethod
    def to_arrow(self) -> pa.DataType:
        """The Arrow type snapshots store values of this type as."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """A JSON-able description; :func:`type_from_json` reverses it."""

    @property
    @abstractmethod
    def python_type(self) -> type:
        """The Python class of values of this type (``object`` when any)."""

    @property
    def is_pickled(self) -> bool:
        """Whether values (or parts of them) are stored as pickles."""
        return False

    def __str__(self) -> str:
        """A compact, readable rendering such as ``MAP<STRING, LIST<LONG>>`` (each kind
        renders itself; a kind that does not is shown by its class name)."""
        return type(self).__name__


@dataclass(frozen=True, slots=True)
class BasicTypeInfo(TypeInformation):
    """An atomic type: STRING, LONG, DOUBLE, SQL_DATE, ..."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in _ATOMIC_ARROW:
            raise InvalidArgumentError(f"unknown basic type {self.name!r}", code="UNSUPPORTED_TYPE")

    def __str__(self) -> str:
        return self.name

    def to_arrow(self) -> pa.DataType:
        return _ATOMIC_ARROW[self.name]

    def to_json(self) -> dict[str, Any]:
        return {"type": self.name}

    @property
    def python_type(self) -> type:
        return _ATOMIC_PYTHON[self.name]


@dataclass(frozen=True, slots=True)
class PickledBytesTypeInfo(TypeInformation):
    """Any Python object, stored as a pickle (PyFlink's PICKLED_BYTE_ARRAY)."""

    def __str__(self) -> str:
        return "PICKLED_BYTE_ARRAY"

    def to_arrow(self) -> pa.DataType:
        return pa.binary()

    def to_json(self) -> dict[str, Any]:
        return {"type": "PICKLED_BYTE_ARRAY"}

    @property
    def python_type(self) -> type:
        return object

    @property
    def is_pickled(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class ListTypeInfo(TypeInformation):
    """A list (``LIST``) or Java array (``PRIMITIVE_ARRAY``, ``BASIC_ARRAY``, ...).

    ``PRIMITIVE_ARRAY(BYTE)`` holds ``bytes``; every other kind holds a ``list``.
    """

    element: TypeInformation
    kind: str = "LIST"

    def __post_init__(self) -> None:
        if self.kind not in _ARRAY_KINDS:
            raise InvalidArgumentError(f"unknown array kind {self.kind!r}", code="UNSUPPORTED_TYPE")
        _check_component(self.element, f"the element type of {self.kind}")
        allowed = {"PRIMITIVE_ARRAY": _PRIMITIVE_ELEMENTS, "BASIC_ARRAY": _BASIC_ARRAY_ELEMENTS}
        elements = allowed.get(self.kind)
        if elements is not None and not (
            isinstance(self.element, BasicTypeInfo) and self.element.name in elements
        ):
            raise InvalidArgumentError(
                f"{self.kind} needs an element type among {sorted(elements)}, not {self.element}",
                code="UNSUPPORTED_TYPE",
            )

    @property
    def is_bytes(self) -> bool:
        return self.kind == "PRIMITIVE_ARRAY" and self.element == BasicTypeInfo("BYTE")

    def __str__(self) -> str:
        return f"{self.kind}<{self.element}>"

    def to_arrow(self) -> pa.DataType:
        return pa.binary() if self.is_bytes else pa.list_(self.element.to_arrow())

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "element": self.element.to_json()}

    @property
    def python_type(self) -> type:
        return bytes if self.is_bytes else list

    @property
    def is_pickled(self) -> bool:
        return self.element.is_pickled


@dataclass(frozen=True, slots=True)
class MapTypeInfo(TypeInformation):
    """A ``dict`` from keys of one type to values of another."""

    key: TypeInformation
    value: TypeInformation

    def __post_init__(self) -> None:
        _check_component(self.key, "the key type of MAP")
        _check_component(self.value, "the value type of MAP")
        if isinstance(self.key, ArrowTypeInfo) and pa.types.is_null(self.key.arrow_type):
            raise InvalidArgumentError("a MAP key type cannot be the null type", code="UNSUPPORTED_TYPE")

    def __str__(self) -> str:
        return f"MAP<{self.key}, {self.value}>"

    def to_arrow(self) -> pa.DataType:
        return pa.map_(self.key.to_arrow(), self.value.to_arrow())

    def to_json(self) -> dict[str, Any]:
        return {"type": "MAP", "key": self.key.to_json(), "value": self.value.to_json()}

    @property
    def python_type(self) -> type:
        return dict

    @property
    def is_pickled(self) -> bool:
        return self.key.is_pickled or self.value.is_pickled


@dataclass(frozen=True, slots=True)
class RowTypeInfo(TypeInformation):
    """A ``tuple`` of typed fields: ``ROW`` (nullable fields) or ``TUPLE`` (no nulls)."""

    field_types: tuple[TypeInformation, ...]
    field_names: tuple[str, ...]
    kind: str = "ROW"

    def __post_init__(self) -> None:
        # Lists are accepted and stored as tuples, so the type stays hashable.
        object.__setattr__(self, "field_types", tuple(self.field_types))
        object.__setattr__(self, "field_names", tuple(self.field_names))
        for i, t in enumerate(self.field_types):
            _check_component(t, f"field {i} of {self.kind}")
        for name in self.field_names:
            if not isinstance(name, str) or not name:
                raise InvalidArgumentError(
                    f"a field name must be a non-empty str, got {name!r}", code="UNSUPPORTED_TYPE"
                )
        if len(self.field_types) != len(self.field_names):
            raise InvalidArgumentError(
                f"{len(self.field_names)} field names for {len(self.field_types)} field types",
                code="UNSUPPORTED_TYPE",
            )
        if len(set(self.field_names)) != len(self.field_names):
            raise InvalidArgumentError(
                f"duplicate field names in {self.field_names}", code="UNSUPPORTED_TYPE"
            )
        if self.kind not in ("ROW", "TUPLE"):
            raise InvalidArgumentError(f"unknown row kind {self.kind!r}", code="UNSUPPORTED_TYPE")

    def __str__(self) -> str:
        return f"{self.kind}<{self.fields_text()}>"

    def fields_text(self) -> str:
        """The fields as ``name TYPE, ...``."""
        return ", ".join(f"{n} {t}" for n, t in zip(self.field_names, self.field_types, strict=False))

    def to_arrow(self) -> pa.DataType:
        return pa.struct(
            [pa.field(n, t.to_arrow()) for n, t in zip(self.field_names, self.field_types, strict=False)]
        )

    def to_json(self) -> dict[str, Any]:
        fields = [
            {"name": n, **t.to_json()} for n, t in zip(self.field_names, self.field_types, strict=False)
        ]
        return {"type": self.kind, "fields": fields}

    @property
    def python_type(self) -> type:
        return tuple

    @property
    def is_pickled(self) -> bool:
        return any(t.is_pickled for t in self.field_types)


@dataclass(frozen=True, slots=True)
class ArrowTypeInfo(TypeInformation):
    """Any other Arrow type, holding what ``pyarrow`` converts it to in Python."""

    arrow_type: pa.DataType

    def __post_init__(self) -> None:
        if not isinstance(self.arrow_type, pa.DataType):
            raise StateTypeError(
                f"expected a pyarrow.DataType, got {self.arrow_type!r}", code="UNSUPPORTED_TYPE"
            )

    def __str__(self) -> str:
        return f"ARROW<{self.arrow_type}>"

    def to_arrow(self) -> pa.DataType:
        return self.arrow_type

    def to_json(self) -> dict[str, Any]:
        schema = pa.schema([pa.field("v", self.arrow_type)])
        return {"type": "ARROW", "schema": schema.serialize().to_pybytes().hex()}

    @property
    def python_type(self) -> type:
        return object
