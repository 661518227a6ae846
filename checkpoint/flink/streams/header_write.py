"""The headers of the state streams the savepoint writer writes: the inverse of :mod:`.header_read`.

A keyed state stream's header (``KeyedBackendSerializationProxy``, version 6 for every release
1.13-2.3, not compressed):
``int version, bool compressed, key serializer snapshot, short n`` state meta infos, each
``UTF name, int backend state type, options (UTF, UTF)*, serializer snapshots (UTF key,
snapshot)*``: a keyed state's (backend type KEY_VALUE, option KEYED_STATE_TYPE, its
VALUE_SERIALIZER and NAMESPACE_SERIALIZER) or a timer queue's (backend type PRIORITY_QUEUE, no
options, a ``TimerSerializerSnapshot``). An operator state's meta info (backend type OPERATOR,
option OPERATOR_STATE_DISTRIBUTION_MODE, the element's VALUE_SERIALIZER; a broadcast state's:
backend type BROADCAST, its VALUE_SERIALIZER and KEY_SERIALIZER). A state carried from a Flink
savepoint as it was has its meta info written as the bytes read. Serializer snapshots are
written as the target release writes them (:class:`..metadata.versions.FlinkTarget`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from flinkstate.state.operator import OperatorStateData, OperatorStateMode
from flinkstate.state.serializers.base import TypeSerializer
from flinkstate.state.types.mapping import TypeInformation

from ..metadata.versions import FlinkTarget
from ..types.snapshots_write import (
    Snapshot,
    VerbatimSnapshot,
    key_snapshot,
    list_of,
    map_of,
    snapshot_of,
    ttl,
)
from ..wire.data_write import Output
from .header_read import BACKEND_TYPES, SUPPORTED_VERSIONS
from .namespaces_write import Namespace, timer_snapshot

HEADER_VERSION = max(SUPPORTED_VERSIONS)
_KEY_VALUE = BACKEND_TYPES.index("KEY_VALUE")
_PRIORITY_QUEUE = BACKEND_TYPES.index("PRIORITY_QUEUE")
_MODE_OPTION = "OPERATOR_STATE_DISTRIBUTION_MODE"
#: The key of :attr:`OperatorStateData.meta` holding a verbatim state's meta info bytes.
VERBATIM = "flink_meta_info"


@dataclass(frozen=True)
class KeyedStateSpec:
    """A keyed state to write: ``value`` is the value (also of reducing state), list element,
    map value or accumulator type; a timer queue (kind PRIORITY_QUEUE) holds timestamps.
    ``verbatim``: the state's meta info as read from a Flink savepoint, written as it is; its
    entries are then bytes (:mod:`..writer.passthrough`): each key's bytes after the key-group prefix
    and its value bytes, unless ``encoder`` encodes its values (a declared Kryo class set from
    rows: :mod:`..types.kryo_write`)."""

    name: str
    kind: str  # VALUE | LIST | MAP | REDUCING | AGGREGATING | PRIORITY_QUEUE
    value: TypeInformation
    user_key: TypeInformation | None = None
    ttl: bool = False
    namespace: Namespace = Namespace.VOID
    verbatim: bytes | None = field(default=None, repr=False)
    encoder: TypeSerializer | None = field(default=None, repr=False, compare=False)
    #: The value's snapshot where it is not the one of ``value`` (with ``encoder``, a state
    #: migrated to Flink 2.x's serializers: :mod:`..writer.migrate`).
    snapshot: Snapshot | None = field(default=None, repr=False)

    @property
    def carried(self) -> bool:
        """Whether the entries are bytes carried as read (see the class docstring)."""
        return self.verbatim is not None and self.encoder is None

    @property
    def is_timer(self) -> bool:
        return self.kind == "PRIORITY_QUEUE"

    def value_snapshot(self, what: str = "") -> Snapshot:
        """The VALUE_SERIALIZER snapshot Flink registers for this state (``what`` names it in errors)."""
        what = what or f"state {self.name}"
        value = self.snapshot or snapshot_of(self.value, what)
        if self.ttl:
            value = ttl(value)
        if self.kind == "LIST":
            return list_of(value)
        if self.kind == "MAP":
            assert self.user_key is not None
            return map_of(key_snapshot(self.user_key, f"{what} (map key)"), value)
        return value


def write_header(
    out: Output, key: Snapshot | VerbatimSnapshot, states: Sequence[KeyedStateSpec], flink: FlinkTarget
) -> None:
    out.i32(HEADER_VERSION, "keyed state format version")
    out.boolean(False)  # not compressed
    key.write_top_level(out, flink)
    out.i16(len(states), "state count")
    for s in states:
        if s.verbatim is not None:
            out.raw(s.verbatim)
            continue
        out.utf(s.name, "state name")
        if s.is_timer:
            assert isinstance(key, Snapshot)  # a verbatim key's states are all verbatim
            out.i32(_PRIORITY_QUEUE, "backend state type")
            out.i32(0, "option count")
            out.i32(1, "serializer count")
            out.utf("VALUE_SERIALIZER", "serializer key")
            timer_snapshot(key, s.namespace).write_top_level(out, flink)
            continue
        out.i32(_KEY_VALUE, "backend state type")
        out.i32(1, "option count")
        out.utf("KEYED_STATE_TYPE", "option key")
        out.utf(s.kind, "option value")
        out.i32(2, "serializer count")
        out.utf("VALUE_SERIALIZER", "serializer key")
        s.value_snapshot().write_top_level(out, flink)
        out.utf("NAMESPACE_SERIALIZER", "serializer key")
        s.namespace.snapshot.write_top_level(out, flink)


def write_operator_meta(out: Output, s: OperatorStateData, flink: FlinkTarget) -> None:
    """An operator (list, union) or broadcast state's meta info; a verbatim one as read."""
    if VERBATIM in s.meta:
        out.raw(s.meta[VERBATIM])
        return
    broadcast = s.mode is OperatorStateMode.BROADCAST
    out.utf(s.name, "state name")
    out.i32(BACKEND_TYPES.index("BROADCAST" if broadcast else "OPERATOR"), "backend state type")
    out.i32(1, "option count")
    out.utf(_MODE_OPTION, "option key")
    out.utf(s.mode.name, "option value")
    out.i32(2 if broadcast else 1, "serializer count")
    out.utf("VALUE_SERIALIZER", "serializer key")
    snapshot_of(s.value_type, s.name).write_top_level(out, flink)
    if broadcast:
        assert s.user_key_type is not None
        out.utf("KEY_SERIALIZER", "serializer key")
        key_snapshot(s.user_key_type, s.name).write_top_level(out, flink)
