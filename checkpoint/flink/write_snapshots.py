"""Serializer snapshots for state meta info: the inverse of :mod:`.snapshots`.

A snapshot is ``UTF class name, int version, payload``. Flink's simple (atomic, byte[])
snapshots have version 3 and no payload; composite ones (List, Map, Tuple, Row, the TTL
wrapper) have version 3 and a payload of ``int magic, int outer version``, the outer
snapshot (a Tuple's class name, a Row's row-kind flag), then their nested snapshots
(``int magic, int 1, int count``, each a snapshot). The class names and magic numbers are
the reader's; the versions are those Flink 2.3 writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from flinkstate.state.types.mapping import (
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    RowTypeInfo,
    TypeInformation,
)

from .errors import UnsupportedFlinkWriteError
from .output import Output
from .snapshots import (
    _ATOMIC,
    _BYTES,
    _COMPOSITE_MAGIC,
    _LIST,
    _MAP,
    _NESTED_MAGIC,
    _ROW,
    _TIMER,
    _TTL,
    _TUPLE,
    _VOID,
)

#: The top-level snapshot framing (``TypeSerializerSnapshotSerializationUtil``'s version).
TOP_LEVEL_VERSION = 2
SIMPLE_VERSION = 3  # SimpleTypeSerializerSnapshot
COMPOSITE_VERSION = 3  # CompositeTypeSerializerSnapshot
NESTED_VERSION = 1
_OUTER_VERSIONS = {_LIST: 1, _MAP: 1, _TTL: 2, _TUPLE: 2, _ROW: 4, _TIMER: 2}
_TUPLE_CLASS = "org.apache.flink.api.java.tuple.Tuple{}"
_MAX_TUPLE_ARITY = 25
#: Our atomic type name -> Flink's snapshot class (the reader also accepts ``IntegerSerializer``,
#: which Flink does not have).
ATOMIC_CLASSES = {t: name for name, t in _ATOMIC.items() if "IntegerSerializer" not in name}


@dataclass(frozen=True)
class Snapshot:
    """A serializer snapshot to write: its class and, for composites, the nested snapshots
    and the outer snapshot (a Tuple's class name; a Row's "has row kind" flag)."""

    class_name: str
    nested: tuple[Snapshot, ...] = ()
    tuple_class: str = ""

    @property
    def composite(self) -> bool:
        return self.class_name in _OUTER_VERSIONS

    def write(self, out: Output) -> None:
        out.utf(self.class_name, "snapshot class")
        if not self.composite:
            out.i32(SIMPLE_VERSION, "snapshot version")
            return
        out.i32(COMPOSITE_VERSION, "snapshot version")
        out.i32(_COMPOSITE_MAGIC, "composite magic")
        out.i32(_OUTER_VERSIONS[self.class_name], "outer version")
        if self.class_name == _TUPLE:
            out.utf(self.tuple_class, "tuple class")
        elif self.class_name == _ROW:
            out.boolean(True)  # Flink's Row serializer writes the row kind
        out.i32(_NESTED_MAGIC, "nested magic")
        out.i32(NESTED_VERSION, "nested version")
        out.i32(len(self.nested), "nested count")
        for n in self.nested:
            n.write(out)

    def write_top_level(self, out: Output) -> None:
        out.i32(TOP_LEVEL_VERSION, "snapshot format version")
        self.write(out)


VOID = Snapshot(_VOID)
LONG = Snapshot(ATOMIC_CLASSES["LONG"])


def atomic_name(t: TypeInformation) -> str | None:
    """Our atomic type's name when Flink has a built-in serializer for it (else None)."""
    if isinstance(t, BasicTypeInfo) and t.name in ATOMIC_CLASSES:
        return t.name
    return None


def key_snapshot(t: TypeInformation, what: str) -> Snapshot:
    """The snapshot of Flink's serializer for a key, map key or broadcast key: an atomic type."""
    name = atomic_name(t)
    if name is None:
        raise UnsupportedFlinkWriteError(
            f"{what}: type {t} cannot be written to a Flink savepoint as a key yet (supported: "
            f"{', '.join(sorted(ATOMIC_CLASSES))})"
        )
    return Snapshot(ATOMIC_CLASSES[name])


def snapshot_of(t: TypeInformation, what: str) -> Snapshot:
    """The snapshot of Flink's serializer for our value type ``t``: an atomic type, byte[],
    or a List, Map, Tuple or Row (Flink's ListSerializer, MapSerializer, TupleSerializer,
    RowSerializer) of such; ``what`` names the state."""
    if atomic_name(t) is not None:
        return key_snapshot(t, what)
    if isinstance(t, ListTypeInfo) and t.is_bytes:
        return Snapshot(_BYTES)
    if isinstance(t, ListTypeInfo) and t.kind == "LIST":
        return list_of(snapshot_of(t.element, what))
    if isinstance(t, MapTypeInfo):
        return map_of(key_snapshot(t.key, f"{what} (map key)"), snapshot_of(t.value, what))
    if isinstance(t, RowTypeInfo) and t.kind in ("TUPLE", "ROW"):
        fields = tuple(snapshot_of(f, what) for f in t.field_types)
        if t.kind == "ROW":
            return Snapshot(_ROW, fields)
        if not 1 <= len(fields) <= _MAX_TUPLE_ARITY:
            raise UnsupportedFlinkWriteError(f"{what}: Flink has no Tuple of {len(fields)} fields")
        return Snapshot(_TUPLE, fields, _TUPLE_CLASS.format(len(fields)))
    raise UnsupportedFlinkWriteError(
        f"{what}: type {t} cannot be written to a Flink savepoint yet (supported: "
        f"{', '.join(sorted(ATOMIC_CLASSES))}, byte[], and List, Map, Tuple and Row of them)"
    )


def ttl(value: Snapshot) -> Snapshot:
    """Flink's TTL wrapper around ``value``: the last-access timestamp (a Long), then the value."""
    return Snapshot(_TTL, (LONG, value))


def list_of(element: Snapshot) -> Snapshot:
    return Snapshot(_LIST, (element,))


def map_of(key: Snapshot, value: Snapshot) -> Snapshot:
    return Snapshot(_MAP, (key, value))
