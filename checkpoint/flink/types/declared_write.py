"""The Flink types users declare for state written from Arrow columns (a DataFrame).

Where the columns do not say which Flink serializer a state has, the user declares it: a
Java class name (``java.lang.Long``, ``long``, ``byte[]``, ``java.util.List<java.lang.String>``,
``java.util.Map<java.lang.String, java.lang.Long>``) or a Spark DDL type (see
:func:`.declared_read.parse_type`: ``BIGINT``, ``ARRAY<INT>``, ``STRUCT<id: BIGINT, name: STRING>``
for a Row). Undeclared, a column's Arrow type gives it, and every column is checked against
its type, as :mod:`flinkstate.checkpoint.state_rows` does for every writer
(:func:`~flinkstate.checkpoint.state_rows.default_type`,
:func:`~flinkstate.checkpoint.state_rows.fit`).
"""

from __future__ import annotations

from flinkstate.state.types.mapping import (
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    TypeInformation,
    to_type_info,
)

from ..errors import DeclaredTypeError
from .declared_read import parse_type

_JAVA: dict[str, str] = {
    "Long": "LONG", "long": "LONG", "Integer": "INT", "int": "INT", "Short": "SHORT", "short": "SHORT",
    "Byte": "BYTE", "byte": "BYTE", "Boolean": "BOOLEAN", "boolean": "BOOLEAN", "Double": "DOUBLE",
    "double": "DOUBLE", "Float": "FLOAT", "float": "FLOAT", "Character": "CHAR", "char": "CHAR",
    "String": "STRING",
}  # fmt: skip
_JAVA_LIST = ("java.util.List", "List", "java.util.ArrayList")
_JAVA_MAP = ("java.util.Map", "Map", "java.util.HashMap")


def _split_arguments(text: str) -> list[str]:
    """The comma-separated arguments of a generic type, at the top level of ``<>``."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += {"<": 1, ">": -1}.get(c, 0)
        if c == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return out


def _java(text: str) -> TypeInformation | None:
    """A Java class name's type (None: not a Java class name we know)."""
    name = text.strip()
    simple = name.removeprefix("java.lang.")
    if simple in _JAVA:
        return BasicTypeInfo(_JAVA[simple])
    if name in ("byte[]", "[B"):
        return ListTypeInfo(BasicTypeInfo("BYTE"), "PRIMITIVE_ARRAY")
    if not name.endswith(">") or "<" not in name:
        return None
    head, inner = name[: name.index("<")].strip(), name[name.index("<") + 1 : -1]
    if head not in _JAVA_LIST + _JAVA_MAP:
        return None
    args = [flink_type(a) for a in _split_arguments(inner)]
    if head in _JAVA_LIST and len(args) == 1:
        return ListTypeInfo(args[0], "LIST")
    if head in _JAVA_MAP and len(args) == 2:
        return MapTypeInfo(args[0], args[1])
    raise DeclaredTypeError(f"cannot parse the type {text!r}: List takes one parameter, Map two")


def flink_type(text: str) -> TypeInformation:
    """The type a declaration names: a Java class name or a Spark DDL type (see the module)."""
    found = _java(text)
    if found is not None:
        return found
    return to_type_info(parse_type(text))
