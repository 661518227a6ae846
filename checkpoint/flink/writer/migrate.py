"""Flink 1.x keyed states written for Flink 2.x where 2.x would misread or refuse them as read.

A POJO whose ``List`` field Flink 1.x serialized with Kryo (a GenericType) is refused by
Flink 2.x's restore (``StateMigrationException``: its type extraction gives the field
``Nullable(List(Nullable(T)))``). Declared (``STRUCT<tags: ARRAY<STRING>>``:
:mod:`..reader.kryo_declared`), such a state is migrated (:func:`pojo_spec`): its POJO snapshot
written as Flink 2.x writes it, the List fields' serializers as :mod:`..types.nullable` builds
them, its values encoded with those serializers. Kryo states of declared classes are re-encoded
by :func:`.flink_source.kryo_spec`; what neither can write is refused with the declaration that
would make it convertible (:func:`declaration_hint`).
"""

from __future__ import annotations

from collections.abc import Callable

from flinkstate.state.serializers.atomic import StringSerializer
from flinkstate.state.serializers.composite import PojoSerializer
from flinkstate.state.serializers.lookup import serializer_for

from ..errors import UnsupportedFlinkWriteError
from ..streams.header_read import StateInfo
from ..streams.header_write import KeyedStateSpec
from ..streams.namespaces_write import flink_namespace
from ..types import classes
from ..types.flink_type import FlinkType
from ..types.kryo_generic import LIST_CLASSES
from ..types.nullable import flink2_list_field
from ..types.snapshots_write import ATOMIC_CLASSES, Snapshot, list_of, nullable, snapshot_of
from .passthrough import serializer_classes, snapshot_classes

#: Flink 2.x's snapshot of a POJO's ``List<String>`` field.
_FLINK2_STRING_LIST = nullable(list_of(nullable(Snapshot(ATOMIC_CLASSES["STRING"]))))


def _value(info: StateInfo) -> FlinkType:
    return info.value.inner if info.value.inner is not None else info.value


def kryo_lists(t: FlinkType) -> list[str]:
    """The names of POJO ``t``'s Kryo (GenericType) fields ([] if ``t`` is no POJO or has none)."""
    if t.snapshot_class != classes.POJO:
        return []
    return [n for n, c in zip(t.field_names, t.children, strict=True) if c.snapshot_class == classes.KRYO]


def nullable_lists(t: FlinkType) -> list[str]:
    """The fields of the POJOs in ``t`` (or nested in it) that Flink 2.x gave ``Nullable(List)``
    serializers."""
    inner = t.inner if t.inner is not None else t
    found = [
        n
        for n, c in zip(inner.field_names, inner.children, strict=False)
        if inner.snapshot_class == classes.POJO and c.snapshot_class == classes.NULLABLE
    ]
    return found + [n for c in inner.children for n in nullable_lists(c)]


def pojo_spec(info: StateInfo, what: str, check_key: Callable[[FlinkType], object]) -> KeyedStateSpec | None:
    """Keyed state ``info``, a POJO whose List fields were declared, written with Flink 2.x's
    serializers (None: not such a state; ``check_key`` refuses a map key the writer cannot
    encode)."""
    value = _value(info)
    if info.is_timer or not kryo_lists(value) or not value.decodable or value.type_info is None:
        return None
    if info.user_key is not None:
        check_key(info.user_key)
    fields, serializers = [], []
    for name, child in zip(value.field_names, value.children, strict=True):
        assert child.type_info is not None  # decodable
        if child.snapshot_class == classes.KRYO:
            fields.append(_FLINK2_STRING_LIST)
            serializers.append(flink2_list_field(StringSerializer()))
            continue
        ours = snapshot_of(child.type_info, f"{what}, field {name}")
        if snapshot_classes(ours) != serializer_classes(child):
            raise UnsupportedFlinkWriteError(
                f"{what}: POJO field {name}'s serializer {child.java_class or child.snapshot_class} "
                "cannot be written yet"
            )
        fields.append(ours)
        serializers.append(serializer_for(child.type_info))
    snapshot = Snapshot(
        classes.POJO, tuple(fields), pojo_class=value.java_class, field_names=value.field_names
    )
    return KeyedStateSpec(
        info.name,
        info.kind,
        value.type_info,
        info.user_key.type_info if info.user_key is not None else None,
        info.ttl,
        flink_namespace(info.namespace, what),
        encoder=PojoSerializer(tuple(serializers), value.java_class),
        snapshot=snapshot,
    )


def declaration_hint(info: StateInfo) -> str:
    """The declaration that would make state ``info``'s Kryo values convertible."""
    value = _value(info)
    lists = kryo_lists(value)
    if lists:
        kinds = {c.java_class for c in value.children if c.snapshot_class == classes.KRYO}
        if kinds <= set(LIST_CLASSES):
            ddl = "STRUCT<" + ", ".join(f"{n}: ARRAY<STRING>" for n in lists) + ">"
            return (
                f"declare its POJO's List fields: types={{{info.name!r}: {ddl!r}}} "
                f"(CLI: --type {info.name}='{ddl}')"
            )
        return f"its POJO's Kryo fields {', '.join(lists)} are not Lists, which are the only ones converted"
    if value.snapshot_class == classes.KRYO and value.java_class in value.kryo_serializers:
        return (
            f"none can: its Kryo class {value.java_class} has a Kryo serializer of its own, whose bytes "
            "no declaration describes"
        )
    if value.snapshot_class == classes.KRYO:
        return (
            f"declare its Kryo class {value.java_class} as a STRUCT of its fields: "
            f"types={{{info.name!r}: 'STRUCT<field: TYPE, ...>'}} (CLI: --type {info.name}='STRUCT<...>')"
        )
    return "only a keyed state's declared Kryo class or POJO List fields can be re-encoded"
