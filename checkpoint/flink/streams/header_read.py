"""The header of a keyed state stream: Flink's ``KeyedBackendSerializationProxy``.

``int version, bool compressed, key serializer snapshot, short state count``, then per
state its meta info: ``UTF name, int backend state type, options (UTF, UTF)*,
serializer snapshots (UTF key, snapshot)*``.

Each subtask writes its own header, listing only the states that subtask registered: an
operator's states are those of every subtask's header (:func:`union_headers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import FlinkFormatError, FlinkHeaderConflictError
from ..metadata.metadata_read import StreamHandle
from ..types.flink_type import FlinkType
from ..types.snapshots_read import read_top_level
from ..wire.data_read import Cursor

SUPPORTED_VERSIONS = (5, 6)
BACKEND_TYPES = ("KEY_VALUE", "OPERATOR", "BROADCAST", "PRIORITY_QUEUE")


@dataclass(frozen=True)
class StateInfo:
    """One state's meta info. ``value`` is the value, list element or map value type."""

    state_id: int
    name: str
    kind: str  # VALUE | LIST | MAP | REDUCING | AGGREGATING | PRIORITY_QUEUE; operator state:
    # SPLIT_DISTRIBUTE | UNION | BROADCAST
    namespace: FlinkType | None
    value: FlinkType
    user_key: FlinkType | None
    stored: FlinkType  # the VALUE_SERIALIZER as stored (a List/Map serializer for LIST/MAP)
    #: The meta info's bytes as read (what the writer carries verbatim for a state it cannot re-encode).
    meta: bytes = field(default=b"", repr=False, compare=False)

    @property
    def ttl(self) -> bool:
        return self.value.ttl

    @property
    def is_timer(self) -> bool:
        return self.kind == "PRIORITY_QUEUE"


@dataclass(frozen=True)
class KeyedHeader:
    version: int
    compressed: bool
    key: FlinkType
    states: tuple[StateInfo, ...]
    end: int  # byte offset right after the header
    #: The key serializer's snapshot (top-level) as read.
    key_bytes: bytes = field(default=b"", repr=False, compare=False)


def read_meta_info(c: Cursor, state_id: int) -> StateInfo:
    start = c.pos
    info = _meta_info(c, state_id)
    return replace(info, meta=bytes(c.buf[start : c.pos]))


def _meta_info(c: Cursor, state_id: int) -> StateInfo:
    name = c.utf("state name")
    at = c.pos
    backend_type = c.i32("backend state type")
    if not 0 <= backend_type < len(BACKEND_TYPES):
        raise c.fail(f"state {name}: unknown backend state type {backend_type}", at)
    options = {c.utf("option key"): c.utf("option value") for _ in range(c.count("option count", 4))}
    serializers = {}
    for _ in range(c.count("serializer count", 6)):
        key = c.utf("serializer key")
        serializers[key] = read_top_level(c, f"state {name} {key.lower()}")
    value = serializers.get("VALUE_SERIALIZER")
    if value is None:
        raise c.fail(f"state {name} has no value serializer")
    backend = BACKEND_TYPES[backend_type]
    if backend == "PRIORITY_QUEUE":
        return StateInfo(state_id, name, "PRIORITY_QUEUE", None, value, None, value)
    if backend == "OPERATOR":
        mode = options.get("OPERATOR_STATE_DISTRIBUTION_MODE", "SPLIT_DISTRIBUTE")
        return StateInfo(state_id, name, mode, None, value, None, value)
    if backend == "BROADCAST":
        map_key = serializers.get("KEY_SERIALIZER")
        return StateInfo(state_id, name, "BROADCAST", None, value, map_key, value)
    kind = options.get("KEYED_STATE_TYPE", "VALUE")
    namespace = serializers.get("NAMESPACE_SERIALIZER")
    element, user_key = value, None
    if kind == "LIST":
        element = _child(value, 0, c, name)
    elif kind == "MAP":
        user_key, element = _child(value, 0, c, name), _child(value, 1, c, name)
    return StateInfo(state_id, name, kind, namespace, element, user_key, value)


def _child(t: FlinkType, index: int, c: Cursor, name: str) -> FlinkType:
    if len(t.children) <= index:
        raise c.fail(f"state {name}: serializer {t.snapshot_class} has no nested serializer {index}")
    return t.children[index]


def read_header(buf: bytes, where: str) -> KeyedHeader:
    c = Cursor(buf, where)
    version = c.i32("keyed state format version")
    if version not in SUPPORTED_VERSIONS:
        raise c.fail(f"unsupported keyed state format version {version}", 0)
    compressed = c.boolean("compression flag")
    at = c.pos
    key = read_top_level(c, "key serializer")
    key_bytes = bytes(buf[at : c.pos])
    count = c.i16("state count")
    if count < 0:
        raise c.fail(f"negative state count {count}", c.pos - 2)
    states = tuple(read_meta_info(c, i) for i in range(count))
    return KeyedHeader(version, compressed, key, states, c.pos, key_bytes)


HEADER_PREFIX = 64 * 1024
"""Bytes of a stream read for its header at first (more while the header runs past them)."""


def read_stream_header(
    stream: StreamHandle, directory: str, storage: Mapping[str, Any] | None, where: str
) -> KeyedHeader:
    """The header of a keyed state stream, reading only the first bytes of the stream."""
    limit = HEADER_PREFIX
    while True:
        data = stream.read(directory, storage, limit)
        try:
            return read_header(data, where)
        except FlinkFormatError:
            if len(data) < limit:  # the whole stream: the error is the stream's
                raise
            limit *= 8


def union_headers(headers: Sequence[KeyedHeader], where: str) -> KeyedHeader:
    """One header listing the states of every subtask's header, in order of first appearance
    (``state_id``: the position in that list). A state in several headers, and the key, must
    be described alike in each (else ``[FLINK_HEADER_CONFLICT]``)."""
    first = headers[0]
    for header in headers:
        if _shape(header.key) != _shape(first.key):
            raise FlinkHeaderConflictError(
                f"{where}: subtasks' keyed state headers have different keys: "
                f"{first.key.describe()} and {header.key.describe()}"
            )
    states = union_states((h.states for h in headers), where, "keyed state")
    return replace(first, states=tuple(replace(info, state_id=i) for i, info in enumerate(states)))


def union_states(groups: Iterable[Iterable[StateInfo]], where: str, what: str) -> list[StateInfo]:
    """The states of every subtask's ``what`` header (keyed or operator state), in order of
    first appearance: Flink writes in each subtask's header the states that subtask registered.
    A state in several headers must be described alike in each (else ``[FLINK_HEADER_CONFLICT]``)."""
    states: dict[str, StateInfo] = {}
    for group in groups:
        for info in group:
            seen = states.get(info.name)
            if seen is None:
                states[info.name] = info
            elif _state_shape(seen) != _state_shape(info):
                raise FlinkHeaderConflictError(
                    f"{where}: subtasks' {what} headers describe state {info.name!r} differently: "
                    f"{seen.kind} of {seen.value.describe()} and {info.kind} of {info.value.describe()}"
                )
    return list(states.values())


def _shape(t: FlinkType | None) -> tuple[Any, ...] | None:
    """What a serializer snapshot says, comparable across headers (not the decoder objects)."""
    if t is None:
        return None
    return (t.snapshot_class, t.java_class, t.describe(), tuple(_shape(c) for c in t.children))


def _state_shape(s: StateInfo) -> tuple[Any, ...]:
    return (s.kind, _shape(s.namespace), _shape(s.value), _shape(s.user_key), _shape(s.stored))
