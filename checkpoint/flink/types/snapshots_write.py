"""Serializer snapshots for state meta info: the inverse of :mod:`.snapshots_read`.

A snapshot is ``UTF class name, int version, payload``. Flink's simple (atomic, byte[])
snapshots have version 3 and no payload; composite ones (List, Map, Tuple, Row, the TTL
and Nullable wrappers) have version 3 and a payload of ``int magic, int outer version``, the
outer snapshot (a Tuple's class name, a Row's row-kind flag, a Nullable's padding length),
then their nested snapshots (``int magic, int 1, int count``, each a snapshot). A POJO's
(version 2) is its class name, then three "linked optional maps" (``long magic, int count``,
per entry ``UTF name`` and two framed parts, each ``bool present, int length, bytes``): its
fields (the declaring class and field name; the field's snapshot) and two empty maps of
subclasses. The class names and magic numbers are the reader's; the versions are those Flink
1.17, 1.20 and 2.3 write, but for the Row's outer version, which is the target release's
(:class:`..metadata.versions.FlinkTarget`: 3, without the row-kind flag, for Flink 1.13).
"""

from __future__ import annotations

from dataclasses import dataclass

from flinkstate.state.types.mapping import (
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PojoTypeInfo,
    RowTypeInfo,
    TypeInformation,
)

from ..errors import UnsupportedFlinkWriteError
from ..metadata.versions import FlinkTarget
from ..wire.data_write import Output
from . import classes

#: The top-level snapshot framing (``TypeSerializerSnapshotSerializationUtil``'s version).
TOP_LEVEL_VERSION = 2
SIMPLE_VERSION = 3  # SimpleTypeSerializerSnapshot
COMPOSITE_VERSION = 3  # CompositeTypeSerializerSnapshot
NESTED_VERSION = 1
POJO_VERSION = 2
_OUTER_VERSIONS = {
    classes.LIST: 1,
    classes.MAP: 1,
    classes.TTL: 2,
    classes.TUPLE: 2,
    classes.ROW: 4,  # the newest: FlinkTarget.row_outer_version
    classes.TIMER: 2,
    classes.NULLABLE: 2,
}
_TUPLE_CLASS = "org.apache.flink.api.java.tuple.Tuple{}"
_MAX_TUPLE_ARITY = 25
#: Our atomic type name -> Flink's snapshot class (the reader also accepts ``IntegerSerializer``,
#: which Flink does not have).
ATOMIC_CLASSES = {t: name for name, t in classes.ATOMIC.items() if "IntegerSerializer" not in name}


@dataclass(frozen=True)
class Snapshot:
    """A serializer snapshot to write: its class and, for composites, the nested snapshots
    and the outer snapshot (a Tuple's class name; a Row's "has row kind" flag); a POJO's
    class, field names and (``nested``) field snapshots."""

    class_name: str
    nested: tuple[Snapshot, ...] = ()
    tuple_class: str = ""
    pojo_class: str = ""
    field_names: tuple[str, ...] = ()

    @property
    def composite(self) -> bool:
        return self.class_name in _OUTER_VERSIONS

    def write(self, out: Output, flink: FlinkTarget) -> None:
        """This snapshot as Flink release ``flink`` writes it."""
        out.utf(self.class_name, "snapshot class")
        if self.class_name == classes.POJO:
            self._write_pojo(out, flink)
            return
        if not self.composite:
            out.i32(SIMPLE_VERSION, "snapshot version")
            return
        out.i32(COMPOSITE_VERSION, "snapshot version")
        out.i32(classes.COMPOSITE_MAGIC, "composite magic")
        row = self.class_name == classes.ROW
        out.i32(flink.row_outer_version if row else _OUTER_VERSIONS[self.class_name], "outer version")
        if self.class_name == classes.TUPLE:
            out.utf(self.tuple_class, "tuple class")
        elif row and flink.row_outer_version >= 4:
            out.boolean(True)  # Flink's Row serializer writes the row kind (implied by version 3)
        elif self.class_name == classes.NULLABLE:
            out.i32(0, "null padding length")
        out.i32(classes.NESTED_MAGIC, "nested magic")
        out.i32(NESTED_VERSION, "nested version")
        out.i32(len(self.nested), "nested count")
        for n in self.nested:
            n.write(out, flink)

    def _write_pojo(self, out: Output, flink: FlinkTarget) -> None:
        out.i32(POJO_VERSION, "snapshot version")
        out.utf(self.pojo_class, "POJO class")
        out.i64(classes.OPTIONAL_MAP_HEADER, "optional map header")
        out.i32(len(self.nested), "POJO field count")
        for name, field in zip(self.field_names, self.nested, strict=True):
            out.utf(name, "POJO field")
            declared = Output(out.where)
            declared.utf(self.pojo_class, "POJO field class")
            declared.utf(name, "POJO field")
            snapshot = Output(out.where)
            field.write(snapshot, flink)
            for part in (declared, snapshot):
                out.boolean(True)
                out.sized(bytes(part.buf), "POJO field part")
        for _ in range(2):  # no registered and no other subclasses
            out.i64(classes.OPTIONAL_MAP_HEADER, "optional map header")
            out.i32(0, "subclass count")

    def write_top_level(self, out: Output, flink: FlinkTarget) -> None:
        out.i32(TOP_LEVEL_VERSION, "snapshot format version")
        self.write(out, flink)


@dataclass(frozen=True)
class VerbatimSnapshot:
    """A top-level serializer snapshot written as the bytes read from a Flink savepoint (a
    serializer the writer cannot describe itself: Kryo, SQL RowData, ...)."""

    data: bytes

    def write_top_level(self, out: Output, flink: FlinkTarget) -> None:
        """The bytes read (``flink``: unused; what they hold is the source release's)."""
        out.raw(self.data)


VOID = Snapshot(classes.VOID)
LONG = Snapshot(ATOMIC_CLASSES["LONG"])


def atomic_name(t: TypeInformation) -> str | None:
    """Our atomic type's name when Flink has a built-in serializer for it (else None)."""
    if isinstance(t, BasicTypeInfo) and t.name in ATOMIC_CLASSES:
        return t.name
    return None


def key_snapshot(t: TypeInformation, what: str) -> Snapshot:
    """The snapshot of Flink's serializer for a key, map key or broadcast key: an atomic type,
    or a Tuple, Row or POJO of keys (as Flink's ``keyBy``, no byte[], List or Map)."""
    return _snapshot(t, what, key=True)


def snapshot_of(t: TypeInformation, what: str) -> Snapshot:
    """The snapshot of Flink's serializer for our value type ``t``: an atomic type, byte[],
    or a List, Map, Tuple, Row or POJO (Flink's ListSerializer, MapSerializer, TupleSerializer,
    RowSerializer, PojoSerializer) of such; ``what`` names the state."""
    return _snapshot(t, what, key=False)


def _snapshot(t: TypeInformation, what: str, key: bool) -> Snapshot:
    name = atomic_name(t)
    if name is not None:
        return Snapshot(ATOMIC_CLASSES[name])
    if isinstance(t, ListTypeInfo) and t.is_bytes and not key:
        return Snapshot(classes.BYTES)
    if isinstance(t, ListTypeInfo) and t.kind == "LIST" and not key:
        return list_of(_snapshot(t.element, what, key))
    if isinstance(t, MapTypeInfo) and not key:
        return map_of(_snapshot(t.key, f"{what} (map key)", True), _snapshot(t.value, what, key))
    if isinstance(t, PojoTypeInfo):
        named = zip(t.field_names, t.field_types, strict=True)
        fields = tuple(_snapshot(f, f"{what}, field {n}", key) for n, f in named)
        return Snapshot(classes.POJO, fields, pojo_class=t.java_class, field_names=t.field_names)
    if isinstance(t, RowTypeInfo) and t.kind in ("TUPLE", "ROW"):
        named = zip(t.field_names, t.field_types, strict=True)
        fields = tuple(_snapshot(f, f"{what}, field {n}", key) for n, f in named)
        if t.kind == "ROW":
            return Snapshot(classes.ROW, fields)
        if not 1 <= len(fields) <= _MAX_TUPLE_ARITY:
            raise UnsupportedFlinkWriteError(f"{what}: Flink has no Tuple of {len(fields)} fields")
        return Snapshot(classes.TUPLE, fields, _TUPLE_CLASS.format(len(fields)))
    atomic = ", ".join(sorted(ATOMIC_CLASSES))
    supported = (
        f"{atomic}, and Tuple, Row and POJO of them"
        if key
        else f"{atomic}, byte[], and List, Map, Tuple, Row and POJO of them"
    )
    raise UnsupportedFlinkWriteError(
        f"{what}: type {t} cannot be written to a Flink savepoint{' as a key' if key else ''} yet "
        f"(supported: {supported})"
    )


def ttl(value: Snapshot) -> Snapshot:
    """Flink's TTL wrapper around ``value``: the last-access timestamp (a Long), then the value."""
    return Snapshot(classes.TTL, (LONG, value))


def list_of(element: Snapshot) -> Snapshot:
    return Snapshot(classes.LIST, (element,))


def nullable(value: Snapshot) -> Snapshot:
    """Flink's ``NullableSerializer`` around ``value`` (no null padding)."""
    return Snapshot(classes.NULLABLE, (value,))


def map_of(key: Snapshot, value: Snapshot) -> Snapshot:
    return Snapshot(classes.MAP, (key, value))
