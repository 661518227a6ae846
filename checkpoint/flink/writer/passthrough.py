"""States of a Flink savepoint read as bytes: what the savepoint writer carries verbatim.

A state whose serializer the writer cannot encode again (Kryo, SQL RowData, a POJO with
subclasses, a composite of those) is passed through when its values are not changed: its meta
info goes into the new header as the bytes read, and its entries are carried as bytes. In the
canonical key/value layout (canonical savepoints of either backend, compressed or not, and
the SST files of native RocksDB ones) an entry's key bytes are the key-group prefix, then the
key, namespace and user key, and its value bytes stand alone: the reader's
:class:`..reader.raw_entries.RawEntries` keeps each entry's key bytes after the prefix and its value
bytes, so the writer only writes a new prefix (the key group the key falls in at the new max
parallelism). A heap checkpoint frames values by their serializer and cannot be carried this way.

Operator list and union state elements run from one offset ``_metadata`` records to the next
(:func:`..reader.raw_entries.operator_elements`); a broadcast state's map is carried whole, from its
offset on.
Which serializers the writer encodes itself is decided here too (:func:`unwritable`: why not;
:func:`serializer_classes` against the writer's own snapshot, :func:`snapshot_classes`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.operator import OperatorStateData, OperatorStateMode
from flinkstate.state.types.mapping import TypeInformation, Types

from ..metadata.metadata_read import OperatorMeta, SubtaskState
from ..reader.raw_entries import operator_elements
from ..reader.savepoint import FlinkSavepoint
from ..streams.header_read import StateInfo
from ..streams.header_write import VERBATIM, KeyedStateSpec
from ..types import classes
from ..types.classes import ROWDATA
from ..types.flink_type import FlinkType
from ..types.snapshots_write import Snapshot

#: The type a verbatim state's values are given where our type is unknown: bytes.
BYTES: TypeInformation = Types.PRIMITIVE_ARRAY(Types.BYTE())


def serializer_classes(t: FlinkType) -> tuple[Any, ...]:
    """The serializer snapshot classes of a Flink type, nested (and a Tuple's or POJO's class)."""
    java_class = t.java_class if t.snapshot_class in (classes.TUPLE, classes.POJO) else ""
    return (t.snapshot_class, java_class, tuple(serializer_classes(c) for c in t.children))


def snapshot_classes(s: Snapshot) -> tuple[Any, ...]:
    """The same of a snapshot the writer writes."""
    return (s.class_name, s.tuple_class or s.pojo_class, tuple(snapshot_classes(n) for n in s.nested))


def unwritable(t: FlinkType) -> str | None:
    """Why Flink's serializer ``t`` (or one nested in it) cannot be written (None: it can)."""
    inner = t.inner if t.inner is not None else t
    if inner.snapshot_class == classes.KRYO:
        return (
            f"the Kryo-serialized class {inner.java_class} cannot be written (Flink's Kryo bytes and "
            "registrations are not produced)"
        )
    if inner.snapshot_class == ROWDATA:
        return "SQL RowData cannot be written until its serializer snapshot can be produced"
    for child in inner.children:
        why = unwritable(child)
        if why is not None:
            return why
    if not inner.decodable or inner.type_info is None:
        return f"{inner.describe()} cannot be written yet"
    return None


def verbatim_spec(info: StateInfo) -> KeyedStateSpec:
    """A keyed state (or timer queue) written with its meta info as read, its entries as bytes."""
    value = info.value.inner if info.value.inner is not None else info.value
    user_key = info.user_key.type_info or BYTES if info.user_key is not None else None
    return KeyedStateSpec(
        info.name, info.kind, value.type_info or BYTES, user_key, info.ttl, verbatim=info.meta
    )


def check_carried(op: OperatorMeta) -> str | None:
    """Why ``op``'s keyed states cannot be carried as bytes (None: they can)."""
    kinds = {s.managed_keyed.kind for s in op.subtasks if s.managed_keyed is not None}
    if "heap_checkpoint" in kinds:
        return "a heap checkpoint's entries are framed by their serializers and cannot be carried as bytes"
    return None


def verbatim_columns(
    source: FlinkSavepoint, operator: str, spec: KeyedStateSpec
) -> Iterator[tuple[int, StateColumns]]:
    """A keyed state's entries by key group as bytes: ``keys`` the key bytes after the key-group
    prefix, ``values`` the value bytes."""
    groups: dict[int, StateColumns] = {}
    for rows in source.raw_keyed(operator, spec.name, spec.is_timer):
        for kg, key, value in zip(rows.key_group, rows.key, rows.value, strict=True):
            found = groups.setdefault(kg, StateColumns([], None, []))
            found.keys.append(key)
            found.values.append(value)
    yield from sorted(groups.items(), key=lambda item: item[0])


def verbatim_operator_state(
    source: FlinkSavepoint, sub: SubtaskState, info: StateInfo, compressed: bool
) -> OperatorStateData:
    """One subtask's operator state carried as bytes: its meta info and elements (a broadcast
    state: its whole map, as the one value of ``elements``)."""
    handle = sub.managed_operator
    assert handle is not None and handle.stream is not None
    data = handle.stream.read(source.directory, source.storage)
    where = f"{source.directory}: {handle.stream.name}, state {info.name}"
    elements = operator_elements(data, compressed, handle, info.name, where)
    mode = OperatorStateMode[info.kind]
    user_key = BYTES if mode is OperatorStateMode.BROADCAST else None
    held = dict(enumerate(elements)) if mode is OperatorStateMode.BROADCAST else elements
    return OperatorStateData(info.name, mode, BYTES, held, user_key, {VERBATIM: info.meta})
