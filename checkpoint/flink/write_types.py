"""The Flink types of state written from Arrow columns (a DataFrame), and the check that the
values fit them.

Where the columns do not say which Flink serializer a state has, the user declares it: a
Java class name (``java.lang.Long``, ``long``, ``byte[]``, ``java.util.List<java.lang.String>``,
``java.util.Map<java.lang.String, java.lang.Long>``) or a Spark DDL type (see
:func:`.declared.parse_type`: ``BIGINT``, ``ARRAY<INT>``, ``STRUCT<id: BIGINT, name: STRING>``
for a Row). Undeclared, a column's Arrow type gives it (:func:`default_type`): int64 Long,
int32 Integer, int16 Short, int8 Byte, bool Boolean, float64 Double, float32 Float, string
String, binary ``byte[]``, list ``List``, map ``Map``, struct ``Row``. A column whose values do
not fit the declared type (a string for a Long, a Long out of an Integer's range, a string of
two characters for a Character) is ``[TYPE_MISMATCH]`` naming the column, before anything is
written.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.state.types.mapping import (
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    RowTypeInfo,
    TypeInformation,
    to_type_info,
)

from .declared import parse_type
from .errors import DeclaredTypeError

_JAVA: dict[str, str] = {
    "Long": "LONG", "long": "LONG", "Integer": "INT", "int": "INT", "Short": "SHORT", "short": "SHORT",
    "Byte": "BYTE", "byte": "BYTE", "Boolean": "BOOLEAN", "boolean": "BOOLEAN", "Double": "DOUBLE",
    "double": "DOUBLE", "Float": "FLOAT", "float": "FLOAT", "Character": "CHAR", "char": "CHAR",
    "String": "STRING",
}  # fmt: skip
_INTEGERS = ("BYTE", "SHORT", "INT", "LONG")
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


def default_type(t: pa.DataType) -> TypeInformation:
    """The Flink type of an undeclared Arrow column (see the module docstring)."""
    return to_type_info(t)


def _mismatch(what: str, got: pa.DataType, t: TypeInformation, why: str = "") -> DeclaredTypeError:
    return DeclaredTypeError(
        f"{what}: values of type {got} do not fit the Flink type {t}{why}", code="TYPE_MISMATCH"
    )


def _check_kind(got: pa.DataType, t: TypeInformation, what: str) -> None:
    """Refuse an Arrow type whose values are never of ``t`` (``[TYPE_MISMATCH]``)."""
    if pa.types.is_null(got):
        return
    if isinstance(t, BasicTypeInfo):
        ok = {
            "STRING": pa.types.is_string(got) or pa.types.is_large_string(got),
            "CHAR": pa.types.is_string(got) or pa.types.is_large_string(got),
            "BOOLEAN": pa.types.is_boolean(got),
            "FLOAT": pa.types.is_floating(got) or pa.types.is_integer(got),
            "DOUBLE": pa.types.is_floating(got) or pa.types.is_integer(got),
        }.get(t.name, t.name in _INTEGERS and pa.types.is_integer(got))
    elif isinstance(t, ListTypeInfo) and t.is_bytes:
        ok = pa.types.is_binary(got) or pa.types.is_large_binary(got) or pa.types.is_fixed_size_binary(got)
    elif isinstance(t, ListTypeInfo):
        ok = pa.types.is_list(got) or pa.types.is_large_list(got)
        if ok:
            _check_kind(got.value_type, t.element, f"{what} (element)")
    elif isinstance(t, MapTypeInfo):
        ok = pa.types.is_map(got)
        if ok:
            _check_kind(got.key_type, t.key, f"{what} (map key)")
            _check_kind(got.item_type, t.value, f"{what} (map value)")
    elif isinstance(t, RowTypeInfo):
        ok = pa.types.is_struct(got) and got.num_fields == len(t.field_types)
        for i, f in enumerate(t.field_types if ok else ()):
            _check_kind(got.field(i).type, f, f"{what} (field {t.field_names[i]})")
    else:
        ok = True  # other types: the cast decides
    if not ok:
        raise _mismatch(what, got, t)


def _renamed(got: pa.DataType, t: TypeInformation) -> pa.DataType:
    """``t``'s Arrow type with the field names of ``got`` (struct casts match fields by name)."""
    target: pa.DataType = t.to_arrow()
    if isinstance(t, RowTypeInfo) and pa.types.is_struct(got):
        return pa.struct(
            [pa.field(got.field(i).name, _renamed(got.field(i).type, f)) for i, f in enumerate(t.field_types)]
        )
    if isinstance(t, ListTypeInfo) and not t.is_bytes and pa.types.is_list(got):
        return pa.list_(_renamed(got.value_type, t.element))
    if isinstance(t, MapTypeInfo) and pa.types.is_map(got):
        return pa.map_(_renamed(got.key_type, t.key), _renamed(got.item_type, t.value))
    return target


def _check_chars(values: pa.Array, what: str, t: TypeInformation) -> None:
    """A Character is one UTF-16 unit: a string of one character below U+10000."""
    lengths = pc.utf8_length(values)
    bad = pc.and_(pc.is_valid(values), pc.not_equal(pc.fill_null(lengths, 1), 1))
    first: Any = None
    if pc.any(bad).as_py():
        first = pc.filter(values, bad)[0].as_py()
    else:
        wide = [v for v in values.to_pylist() if v is not None and ord(v) > 0xFFFF]
        first = wide[0] if wide else None
    if first is not None:
        raise _mismatch(what, values.type, t, f" (a Java char is one UTF-16 unit, got {first!r})")


def fit(values: pa.Array | pa.ChunkedArray, t: TypeInformation, what: str) -> pa.Array:
    """``values`` as ``t``'s Arrow type; ``[TYPE_MISMATCH]`` naming ``what`` when a value does
    not fit (a wrong kind of value, an integer out of range, a float that is not exact)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    _check_kind(values.type, t, what)
    renamed = _renamed(values.type, t)
    try:
        out = values.cast(renamed, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise _mismatch(what, values.type, t, f": {exc}") from exc
    if isinstance(t, BasicTypeInfo) and t.name == "CHAR":
        _check_chars(out, what, t)
    target = t.to_arrow()
    if renamed != target:
        try:
            out = out.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise _mismatch(what, values.type, t, f": {exc}") from exc
    return out
