"""Types the user declares where a savepoint cannot say: Kryo classes and PyFlink state.

A declaration is a Spark DDL type string (``BIGINT``, ``STRING``, ``DECIMAL(10, 2)``,
``ARRAY<INT>``, ``MAP<STRING, BIGINT>``, ``STRUCT<id: BIGINT NOT NULL, name: STRING>``;
``PICKLED`` for PyFlink's pickled values; Flink's ``TUPLE<BIGINT, STRING>`` and
``POJO com.example.Point<id: BIGINT, name: STRING> HASH(name, id)``, a POJO whose
``hashCode()`` is ``Objects.hash(name, id)``; a STRUCT is a Flink Row), a ``pyarrow.DataType``
or our ``TypeInformation``. Kryo classes are declared as structs: ``NOT NULL`` fields are Java
primitives, nullable ones boxed or String. ``CHAR`` (no length) is a Java ``char`` (Flink's
``Types.CHAR``: a one-character string; inside a struct or an array, a string field marked by
:func:`~flinkstate.state.types.mapping.char_field`), while ``CHAR(n)`` keeps Spark's meaning,
a string. Declarations are keyed by state name (PyFlink
Python state: its Python name); one for a state whose snapshot already gives its type is
refused, never silently applied.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

import pyarrow as pa

from flinkstate.state.errors import InvalidArgumentError
from flinkstate.state.types.mapping import (
    BasicTypeInfo,
    PickledBytesTypeInfo,
    TypeInformation,
    Types,
    char_field,
    to_type_info,
)

from ..errors import DeclaredTypeError

Declared: TypeAlias = "pa.DataType | TypeInformation"
_TOKEN = re.compile(r"\s*([A-Za-z_$][A-Za-z0-9_$.]*|\d+|[<>(),:])")
_SIMPLE: dict[str, pa.DataType] = {
    "BIGINT": pa.int64(), "LONG": pa.int64(), "INT": pa.int32(), "INTEGER": pa.int32(),
    "SMALLINT": pa.int16(), "SHORT": pa.int16(), "TINYINT": pa.int8(), "BYTE": pa.int8(),
    "BOOLEAN": pa.bool_(), "DOUBLE": pa.float64(), "FLOAT": pa.float32(), "REAL": pa.float32(),
    "STRING": pa.string(), "VARCHAR": pa.string(), "BINARY": pa.binary(), "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"), "TIMESTAMP_NTZ": pa.timestamp("us"),
}  # fmt: skip


@dataclass(frozen=True)
class StateDeclaration:
    """The declared value (list element, map value) type, map key type and PyFlink state kind."""

    value: Declared
    user_key: Declared | None = None
    kind: str | None = None  # PyFlink Python state: value | list | map


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                if text[pos:].strip():
                    raise self.fail(f"unexpected {text[pos:].strip()[:10]!r}")
                break
            self.tokens.append(m.group(1))
            pos = m.end()
        self.i = 0

    def fail(self, why: str) -> DeclaredTypeError:
        return DeclaredTypeError(f"cannot parse the type {self.text!r}: {why}")

    def peek(self) -> str:
        return self.tokens[self.i] if self.i < len(self.tokens) else ""

    def next(self) -> str:
        token = self.peek()
        if not token:
            raise self.fail("it ends early")
        self.i += 1
        return token

    def expect(self, token: str) -> None:
        got = self.next()
        if got != token:
            raise self.fail(f"expected {token!r}, got {got!r}")

    def number(self) -> int:
        token = self.next()
        if not token.isdigit():
            raise self.fail(f"expected a number, got {token!r}")
        return int(token)

    def type(self) -> Declared:
        name = self.next().upper()
        if name in ("DECIMAL", "DEC", "NUMERIC"):
            precision, scale = 10, 0
            if self.peek() == "(":
                self.next()
                precision = self.number()
                if self.peek() == ",":
                    self.next()
                    scale = self.number()
                self.expect(")")
            if not 0 < precision <= 38 or scale > precision:
                raise self.fail(f"DECIMAL({precision}, {scale}) is out of range")
            return pa.decimal128(precision, scale)
        if name in ("ARRAY", "MAP", "STRUCT", "TUPLE"):
            self.expect("<")
            out: Declared
            if name == "ARRAY":
                element = self.type()
                if _is_char(element):
                    out = pa.list_(char_field("item"))
                else:
                    out = pa.list_(element) if isinstance(element, pa.DataType) else Types.LIST(element)
            elif name == "MAP":
                key = self.type()
                self.expect(",")
                value = self.type()
                out = _map(key, value)
            elif name == "TUPLE":
                out = self.flink(lambda: Types.TUPLE([_info(t) for t in self.types()]))
            else:
                out = _struct(self.fields())
            self.expect(">")
            return out
        if name == "POJO":
            return self.pojo()
        if name in ("VARCHAR", "CHAR") and self.peek() == "(":
            self.next()
            self.number()
            self.expect(")")
            return pa.string()
        if name == "CHAR":
            return Types.CHAR()
        if name not in _SIMPLE:
            raise self.fail(f"unknown type {name}")
        return _SIMPLE[name]

    def fields(self) -> list[tuple[str, Declared, bool]]:
        """``name[:] type [NOT NULL]``, comma-separated: (name, type, nullable)."""
        out = []
        while True:
            name = self.next()
            if self.peek() == ":":
                self.next()
            t = self.type()
            nullable = True
            if self.peek().upper() == "NOT":
                self.next()
                if self.next().upper() != "NULL":
                    raise self.fail("expected NOT NULL")
                nullable = False
            out.append((name, t, nullable))
            if self.peek() != ",":
                return out
            self.next()

    def types(self) -> list[Declared]:
        out = [self.type()]
        while self.peek() == ",":
            self.next()
            out.append(self.type())
        return out

    def pojo(self) -> Declared:
        """``POJO class<fields> [HASH(field, ...)]`` (NOT NULL: a primitive, serialized alike)."""
        java_class = self.next()
        self.expect("<")
        fields = self.fields()
        self.expect(">")
        hash_fields: list[str] | None = None
        if self.peek().upper() == "HASH":
            self.next()
            self.expect("(")
            hash_fields = [self.next()]
            while self.peek() == ",":
                self.next()
                hash_fields.append(self.next())
            self.expect(")")
        names, types = [n for n, _, _ in fields], [_info(t) for _, t, _ in fields]
        return self.flink(lambda: Types.POJO(java_class, names, types, hash_fields))

    def flink(self, build: Callable[[], TypeInformation]) -> TypeInformation:
        try:
            return build()
        except InvalidArgumentError as exc:
            raise self.fail(str(exc)) from exc


def _info(t: Declared) -> TypeInformation:
    return t if isinstance(t, TypeInformation) else to_type_info(t)


def _map(key: Declared, value: Declared) -> Declared:
    if isinstance(key, pa.DataType) and isinstance(value, pa.DataType):
        return pa.map_(key, value)
    return Types.MAP(_info(key), _info(value))


def _is_char(t: Declared) -> bool:
    return isinstance(t, BasicTypeInfo) and t.name == "CHAR"


def _struct(fields: list[tuple[str, Declared, bool]]) -> Declared:
    """An Arrow struct, or a Row of named fields when one is a Flink type (nulls allowed) other
    than ``CHAR``, which an Arrow struct holds as a marked string field."""
    if all(isinstance(t, pa.DataType) or _is_char(t) for _, t, _ in fields):
        return pa.struct(
            [
                char_field(n, nullable) if _is_char(t) else pa.field(n, t, nullable)
                for n, t, nullable in fields
            ]
        )
    return Types.ROW_NAMED([n for n, _, _ in fields], [_info(t) for _, t, _ in fields])


def parse_type(text: str) -> Declared:
    """A Spark DDL type string as an Arrow type (``PICKLED``: PyFlink's pickled values)."""
    if text.strip().upper() == "PICKLED":
        return PickledBytesTypeInfo()
    parser = _Parser(text)
    out = parser.type()
    if parser.peek():
        raise parser.fail(f"unexpected {parser.peek()!r} after the type")
    return out


def as_declared(value: Any, what: str) -> Declared:
    """A declaration given as a DDL string, a ``pyarrow.DataType`` or a ``TypeInformation``."""
    if isinstance(value, str):
        return parse_type(value)
    if isinstance(value, pa.DataType | TypeInformation):
        return value
    raise DeclaredTypeError(
        f"{what}: expected a DDL type string, pyarrow type or TypeInformation, got {value!r}"
    )


def declarations(types: Mapping[str, Any]) -> dict[str, StateDeclaration]:
    """Declarations by state name from types or :class:`StateDeclaration` s."""
    out = {}
    for name, value in types.items():
        what = f"declared type of state {name}"
        d = value if isinstance(value, StateDeclaration) else StateDeclaration(value)
        if d.kind not in (None, "value", "list", "map"):
            raise DeclaredTypeError(f"{what}: kind must be value, list or map, not {d.kind!r}")
        user_key = None if d.user_key is None else as_declared(d.user_key, what)
        out[name] = replace(d, value=as_declared(d.value, what), user_key=user_key)
    return out


def python_type(value: Declared) -> TypeInformation:
    """The type information a PyFlink coder decodes for a declaration."""
    return value if isinstance(value, TypeInformation) else to_type_info(value)
