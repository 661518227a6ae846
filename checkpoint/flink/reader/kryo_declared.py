"""Kryo states read with the struct types declared for them (:mod:`.types.declared_read`):
a keyed header's Kryo serializers replaced by readers of the declared fields. A POJO whose
``List`` fields Flink 1.x serialized with Kryo (GenericType) is declared as a STRUCT of those
fields (``STRUCT<tags: ARRAY<STRING>>``: :mod:`..types.kryo_generic`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial

import pyarrow as pa

from flinkstate.state.types.mapping import Types
from flinkstate.state.types.typeinfo import ArrowTypeInfo

from ..errors import DeclaredTypeError
from ..streams.header_read import KeyedHeader, StateInfo
from ..types import classes
from ..types.declared_read import Declared, StateDeclaration
from ..types.flink_type import FlinkType
from ..types.kryo_generic import LIST_CLASSES, KryoStringList
from ..types.kryo_read import KryoReader
from ..types.snapshots_read import pojo_type
from ..types.values_read import TtlValueSerializer


def _kryo(t: FlinkType, declared: Declared | None, where: str, kryo: int | Callable[[str], int]) -> FlinkType:
    """``t`` decoded with ``declared`` when ``t`` is a Kryo type (or a TTL wrapper of one)."""
    if declared is None:
        return t
    inner = t.inner if t.inner is not None else t
    if inner.snapshot_class == classes.POJO and any(c.snapshot_class == classes.KRYO for c in inner.children):
        decoded = _pojo(inner, declared, where, kryo if isinstance(kryo, int) else partial(kryo, where))
        if t.inner is None:
            return decoded
        return FlinkType(t.snapshot_class, decoded.type_info, TtlValueSerializer(decoded), inner=decoded)
    if inner.snapshot_class != classes.KRYO:
        raise DeclaredTypeError(
            f"{where}: its type {t.describe()} comes from the savepoint; types are declared only for "
            "Kryo values and PyFlink Python state"
        )
    if inner.java_class in inner.kryo_serializers:
        raise DeclaredTypeError(
            f"{where}: the Kryo class {inner.java_class} has a Kryo serializer of its own (registered "
            "or a default one), whose bytes no declaration describes: it cannot be declared or converted"
        )
    if not isinstance(declared, pa.DataType):
        raise DeclaredTypeError(
            f"{where}: declare the Kryo class {inner.java_class} as a STRUCT (a DDL string or pyarrow "
            "struct), whose NOT NULL fields are Java primitives"
        )
    reader = KryoReader(
        declared, inner.java_class, where, kryo if isinstance(kryo, int) else partial(kryo, where)
    )
    decoded = FlinkType(classes.KRYO, ArrowTypeInfo(declared), reader, java_class=inner.java_class)
    if t.inner is None:
        return decoded
    return FlinkType(t.snapshot_class, decoded.type_info, TtlValueSerializer(decoded), inner=decoded)


def _pojo(t: FlinkType, declared: Declared, where: str, kryo: int | Callable[[], int]) -> FlinkType:
    """POJO ``t`` with its Kryo ``List`` fields read as the STRUCT ``declared`` names them."""
    kryo_fields = {
        n: c for n, c in zip(t.field_names, t.children, strict=True) if c.snapshot_class == classes.KRYO
    }
    example = ", ".join(f"{n}: ARRAY<STRING>" for n in kryo_fields)
    if not isinstance(declared, pa.StructType) or {f.name for f in declared} != set(kryo_fields):
        raise DeclaredTypeError(
            f"{where}: POJO {t.java_class}'s Kryo (GenericType) fields are {', '.join(kryo_fields)}: declare "
            f"them as a STRUCT of those fields, STRUCT<{example}>, not {declared}"
        )
    children = []
    for name, child in zip(t.field_names, t.children, strict=True):
        if name in kryo_fields:
            field = declared.field(name)
            if child.java_class not in LIST_CLASSES or field.type != pa.list_(pa.string()):
                raise DeclaredTypeError(
                    f"{where}: POJO field {name} (Kryo class {child.java_class}) is declared {field.type}; "
                    f"only a List of String ({' or '.join(LIST_CLASSES)}, ARRAY<STRING>) is read"
                )
            reader = KryoStringList(kryo, f"{where}, field {name}")
            child = FlinkType(classes.KRYO, Types.LIST(Types.STRING()), reader, java_class=child.java_class)
        children.append(child)
    if any(not c.decodable or c.type_info is None for c in children):
        raise DeclaredTypeError(f"{where}: POJO {t.java_class} has fields of serializers that are not read")
    return pojo_type(
        t.java_class, tuple(children), t.field_names, lambda why: DeclaredTypeError(f"{where}: {why}")
    )


def apply_declarations(
    header: KeyedHeader,
    declared: Mapping[str, StateDeclaration],
    where: str,
    kryo: int | Callable[[str], int] = 5,
) -> KeyedHeader:
    """``header`` with the Kryo types of declared states replaced by their declared readers
    (``kryo``: the Kryo version of the values, or a function giving it for the state it names,
    asked when the first value is read: see :class:`KryoReader`)."""
    states: list[StateInfo] = []
    for s in header.states:
        d = declared.get(s.name)
        if d is None or s.is_timer:
            states.append(s)
            continue
        at = f"{where}: declared type of state {s.name}"
        user_key = s.user_key
        if s.kind == "MAP" and user_key is not None:
            user_key = _kryo(user_key, d.user_key, f"{at} (map key)", kryo)
        elif d.user_key is not None:
            raise DeclaredTypeError(f"{at}: a map key type is declared but {s.name} is a {s.kind} state")
        states.append(replace(s, value=_kryo(s.value, d.value, at, kryo), user_key=user_key))
    return replace(header, states=tuple(states))
