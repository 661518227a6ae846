"""Serializer snapshots stored in Flink state meta info, mapped to our types.

A snapshot is ``UTF class name, int version, payload`` (top-level ones are preceded by an
int 2). Composite snapshots wrap their nested snapshots in Flink's composite framing;
POJO and Kryo snapshots hold "linked optional maps". Each known snapshot becomes a
:class:`FlinkType`: the serializer class Flink used, our ``TypeInformation`` and a
decoder. Kryo and unknown serializers decode to raw bytes (``decodable`` False); they are
never guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from flinkstate.state.errors import InvalidArgumentError
from flinkstate.state.serializers.composite import ListSerializer, PojoSerializer
from flinkstate.state.serializers.lookup import serializer_for
from flinkstate.state.types.mapping import PojoTypeInfo, RowTypeInfo, TypeInformation, Types

from ..errors import UnsupportedSerializerError
from ..wire.data_read import Cursor
from . import classes
from .flink_type import FlinkType
from .nullable import NullableSerializer
from .rowdata_read import read_rowdata_snapshot
from .values_read import GlobalWindowSerializer, RawSerializer, TtlValueSerializer


def read_top_level(c: Cursor, what: str) -> FlinkType:
    """A snapshot as written by the state meta info writer: int 2, then the snapshot."""
    c.expect_int(2, f"{what} snapshot format version")
    return read_snapshot(c, what)


def read_snapshot(c: Cursor, what: str) -> FlinkType:
    at = c.pos
    name = c.utf(f"{what} snapshot class")
    c.i32(f"{what} snapshot version")
    if name in classes.ATOMIC:
        t = _basic(classes.ATOMIC[name])
        return FlinkType(name, t, serializer_for(t), fixed_width=classes.ATOMIC[name] in classes.FIXED_WIDTH)
    if name in (classes.BYTES, classes.BYTE_WRAPPER):
        t = Types.PRIMITIVE_ARRAY(Types.BYTE())
        return FlinkType(name, t, serializer_for(t))
    if name == classes.VOID:
        return FlinkType(name, None, None, fixed_width=True)
    if name == classes.WINDOW:
        t = RowTypeInfo((_basic("LONG"), _basic("LONG")), ("start", "end"), "TUPLE")
        return FlinkType(name, t, serializer_for(t), fixed_width=True)
    if name == classes.GLOBAL_WINDOW:  # the one global window, as the string "GlobalWindow"
        return FlinkType(name, _basic("STRING"), GlobalWindowSerializer(), fixed_width=True)
    if name in classes.COMPOSITES:
        return _composite(c, name, what)
    if name == classes.POJO:
        return _pojo(c, what)
    if name == classes.ROWDATA:
        return read_rowdata_snapshot(c, what, read_snapshot)
    if name == classes.KRYO:
        java_class = c.utf(f"{what} Kryo type class")
        return FlinkType(
            name,
            Types.PRIMITIVE_ARRAY(Types.BYTE()),
            RawSerializer(),
            False,
            java_class=java_class,
            kryo_serializers=_kryo_serializers(c, what),
        )
    raise UnsupportedSerializerError(
        f"{c.where}: {what} uses serializer snapshot {name}, which cannot be read, at byte offset {at}"
    )


def _kryo_serializers(c: Cursor, what: str) -> tuple[str, ...]:
    """The classes a ``KryoSerializerSnapshot`` gives serializers of their own: its registrations
    (a registered class name, then the serializer definition's ordinal: 0 none, 1 a class, 2 an
    instance) and its default serializers (instances, classes)."""
    found = []
    for key, _, value in _optional_map(c, what):
        if value is not None:
            registration = Cursor(value, c.where)
            registration.utf(f"{what} Kryo registration of {key}")
            if registration.i32(f"{what} Kryo registration kind of {key}") != 0:
                found.append(key)
    for _ in range(2):
        found += [key for key, _, _ in _optional_map(c, what)]
    return tuple(found)


def _basic(name: str) -> TypeInformation:
    factory = getattr(Types, name)
    t: TypeInformation = factory()
    return t


def _nested(c: Cursor, what: str) -> list[FlinkType]:
    c.expect_int(classes.NESTED_MAGIC, f"{what} nested snapshots magic")
    c.i32(f"{what} nested snapshots version")
    return [read_snapshot(c, f"{what} field {i}") for i in range(c.count(f"{what} nested count", 6))]


def _composite(c: Cursor, name: str, what: str) -> FlinkType:
    c.expect_int(classes.COMPOSITE_MAGIC, f"{what} composite snapshot magic")
    outer = c.i32(f"{what} outer version")
    java_class = ""
    if name == classes.TUPLE:
        java_class = c.utf(f"{what} tuple class")
    elif name == classes.ROW and outer >= 4:
        c.boolean(f"{what} row kind flag")
    padding = 0
    if name == classes.NULLABLE:
        if outer != 2:
            raise c.fail(f"{what}: NullableSerializer snapshot of outer version {outer} (known: 2)")
        padding = c.count(f"{what} null padding length", 0)
    nested = _nested(c, what)
    if name == classes.NULLABLE:
        if len(nested) != 1:
            raise c.fail(f"{what}: a NullableSerializer snapshot of {len(nested)} nested snapshots")
        value = nested[0]
        if not value.decodable or value.serializer is None:
            return replace(value, snapshot_class=name, children=(value,))
        serializer = NullableSerializer(value.serializer, padding)
        return FlinkType(name, value.type_info, serializer, fixed_width=padding > 0, children=(value,))
    if name == classes.TTL:
        value = nested[1]
        return FlinkType(name, value.type_info, TtlValueSerializer(value), value.decodable, inner=value)
    if name == classes.TIMER:
        return FlinkType(name, None, None, False, children=tuple(nested))
    for n in nested:
        if not n.decodable or n.type_info is None:
            # Raw-bytes serializers cannot be delimited inside a composite value.
            raw = RawSerializer()
            return FlinkType(
                name, Types.PRIMITIVE_ARRAY(Types.BYTE()), raw, False, java_class=name, children=tuple(nested)
            )
    types = [n.type_info for n in nested if n.type_info is not None]
    if any(n.snapshot_class == classes.NULLABLE for n in nested):
        if name != classes.LIST:
            raise c.fail(f"{what}: a NullableSerializer nested in {name} is not read yet")
        assert nested[0].serializer is not None
        elements = ListSerializer(nested[0].serializer, "inline")
        return FlinkType(name, Types.LIST(types[0]), elements, children=tuple(nested))
    if name == classes.LIST:
        t = Types.LIST(types[0])
    elif name == classes.MAP:
        t = Types.MAP(types[0], types[1])
    else:
        names = tuple(f"f{i}" for i in range(len(types)))
        t = RowTypeInfo(tuple(types), names, "TUPLE" if name == classes.TUPLE else "ROW")
    return FlinkType(name, t, serializer_for(t), java_class=java_class, children=tuple(nested))


def _optional_map(c: Cursor, what: str) -> list[tuple[str, bytes | None, bytes | None]]:
    at = c.pos
    if c.i64(f"{what} optional map header") != classes.OPTIONAL_MAP_HEADER:
        raise c.fail(f"{what}: bad optional map header", at)
    entries = []
    for _ in range(c.count(f"{what} optional map size", 4)):
        key = c.utf(f"{what} optional map key")
        parts: list[bytes | None] = []
        for part in ("key", "value"):
            present = c.boolean(f"{what} optional map {part} flag")
            parts.append(c.take(c.count(f"{what} optional map {part} length"), what) if present else None)
        entries.append((key, parts[0], parts[1]))
    return entries


def _pojo(c: Cursor, what: str) -> FlinkType:
    java_class = c.utf(f"{what} POJO class")
    fields = []
    for field_name, _, snapshot in _optional_map(c, what):
        if snapshot is None:
            raise c.fail(f"{what}: POJO field {field_name} of {java_class} has no serializer snapshot")
        fields.append((field_name, read_snapshot(Cursor(snapshot, c.where), f"{what} field {field_name}")))
    for _ in range(2):
        if _optional_map(c, what):
            return FlinkType(
                classes.POJO,
                Types.PRIMITIVE_ARRAY(Types.BYTE()),
                RawSerializer(),
                False,
                java_class=java_class,
            )
    names, children = tuple(n for n, _ in fields), tuple(f for _, f in fields)
    if any(not f.decodable or f.type_info is None for f in children):
        raw = Types.PRIMITIVE_ARRAY(Types.BYTE())
        return FlinkType(
            classes.POJO,
            raw,
            RawSerializer(),
            False,
            java_class=java_class,
            children=children,
            field_names=names,
        )
    return pojo_type(java_class, children, names, lambda why: c.fail(f"{what}: POJO {java_class}: {why}"))


def pojo_type(
    java_class: str,
    children: tuple[FlinkType, ...],
    names: tuple[str, ...],
    fail: Callable[[str], Exception],
) -> FlinkType:
    """The POJO of decodable fields ``children`` named ``names``; ``fail``: the error of a POJO
    whose fields are not in Flink's order."""
    types = [f.type_info for f in children if f.type_info is not None]
    try:
        t = Types.POJO(java_class, list(names), types)
    except InvalidArgumentError as exc:
        raise fail(str(exc)) from exc
    if isinstance(t, PojoTypeInfo) and t.field_names != names:
        raise fail("its fields are not in Flink's order")
    # Our serializers of the fields' types, but where Flink's differ from them (a Nullable field)
    own = any(f.snapshot_class == classes.NULLABLE or f.snapshot_class == classes.KRYO for f in children)
    fields = tuple(f.serializer for f in children if f.serializer is not None)
    serializer = PojoSerializer(fields, java_class) if own else serializer_for(t)
    return FlinkType(classes.POJO, t, serializer, java_class=java_class, children=children, field_names=names)
