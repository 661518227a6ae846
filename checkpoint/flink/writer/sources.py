"""What the savepoint writer writes from, and its source for one of our checkpoints.

Each source operator (:class:`OperatorSource`) gives its id, layout, key type, keyed states
(with what Flink's serializers must be) and, on demand, each keyed state's entries by key
group and each subtask's operator states. Everything that cannot be written is refused when
the source is built, before any state is read: ``[FLINK_UNSUPPORTED]`` naming the operator and
state. The source for a Flink savepoint read is :mod:`.flink_source`.

Timers are written as Flink's timer queues: of our checkpoints, the map states named as Flink
names its timer queues (``_timer_state/event_<service>``, ``_timer_state/processing_<service>``,
as the process runner's timers are) from LONG timestamps, each in the namespace of its timers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

from flinkstate.state.keyed.snapshot import StateColumns, StateMetaInfo
from flinkstate.state.keygroups.hashing import java_hashed
from flinkstate.state.operator import OperatorStateData, OperatorStateMode
from flinkstate.state.ttl.config import TtlTimeCharacteristic
from flinkstate.state.types.mapping import BasicTypeInfo, TypeInformation

from ...manifest import OperatorEntry
from ...reading.merge import merge_keyed
from ...reading.restore import CompletedCheckpoint
from ..errors import UnsupportedFlinkWriteError
from ..metadata.operator_id import operator_id
from ..metadata.versions import FlinkTarget
from ..streams.header_write import KeyedStateSpec
from ..streams.namespaces_write import namespace_of
from ..streams.operator_write import check_types
from ..types.key_hash import check_key_type, flink_key_group_assigner
from ..types.snapshots_write import Snapshot, VerbatimSnapshot, key_snapshot

_TIMER_QUEUES = ("_timer_state/event_", "_timer_state/processing_")
TIMESTAMP = BasicTypeInfo("LONG")
"""The value type of a timer queue written (a timer's timestamp)."""


def is_timer_queue(meta: StateMetaInfo) -> bool:
    """Whether a state of our checkpoints holds timers: a map of LONG timestamps named as
    Flink names its timer queues."""
    return meta.name.startswith(_TIMER_QUEUES) and meta.kind.name == "MAP" and meta.user_key_type == TIMESTAMP


def timer_columns(columns: StateColumns) -> StateColumns:
    """A timer map state's entries (per key and namespace, a dict of timestamps) as timers:
    one entry per timer, its timestamp the value."""
    keys, namespaces, stamps = [], [], []
    for entry in columns.entries():
        for timestamp in entry.value:
            keys.append(entry.key)
            namespaces.append(entry.namespace)
            stamps.append(timestamp)
    return StateColumns(keys, namespaces, stamps)


class OperatorSource(ABC):
    """One operator to write. ``name``: its uid, or the hex id of a Flink operator without one
    (what messages and the parallelism mappings use)."""

    name: str
    operator_id: bytes
    parallelism: int
    max_parallelism: int
    key_type: TypeInformation | None  # None: no keyed state
    states: tuple[KeyedStateSpec, ...]
    #: The release the source was built for (its states checked and encoded for); None: any.
    flink: FlinkTarget | None = None

    @property
    def flink_key_groups(self) -> bool:
        """Whether keys sit in the key groups Flink gives them (else they are placed again):
        our key groups are Flink's for atomic keys only, so Tuple, Row and POJO keys of a
        source placed by our hash are placed again."""
        return self.key_type is None or java_hashed(self.key_type)

    @abstractmethod
    def keyed_columns(self, index: int) -> Iterator[tuple[int, StateColumns]]:
        """State ``states[index]``'s entries per key group of the source's max parallelism."""

    @abstractmethod
    def operator_states(self) -> list[list[OperatorStateData]]:
        """Each source subtask's operator states (empty for a subtask without)."""

    def key_group(self, key: Any, max_parallelism: int) -> int:
        """The key group Flink assigns ``key`` to at ``max_parallelism`` (by its ``hashCode()``)."""
        assert self.key_type is not None
        if self._assign is None:
            self._assign = flink_key_group_assigner(self.key_type)
        return self._assign(key, max_parallelism)

    _assign: Callable[[Any, int], int] | None = None

    def check_key_groups(self) -> None:
        """Refuse keys :meth:`key_group` cannot place (asked before anything is written)."""
        assert self.key_type is not None
        check_key_type(self.key_type, f"operator {self.name!r}: the key (placed in new key groups)")

    def key_serializer_snapshot(self) -> Snapshot | VerbatimSnapshot:
        """The snapshot of Flink's key serializer."""
        assert self.key_type is not None
        return key_snapshot(self.key_type, f"operator {self.name!r}: the key")

    def verbatim_key(self, spec: KeyedStateSpec, key: bytes) -> Any:
        """The key of an entry of verbatim state ``spec`` (``key``: its key bytes after the
        key-group prefix), to place it at another max parallelism."""
        raise self.refuse(f"state {spec.name!r} is carried as bytes and has no key decoder")

    def settable(self, name: str) -> KeyedStateSpec | None:
        """The spec keyed state ``name``, carried as bytes, is set from rows with (None: it
        cannot be set; a declared Kryo state can: :func:`.flink_source.kryo_spec`)."""
        return None

    def refuse(self, message: str) -> UnsupportedFlinkWriteError:
        return UnsupportedFlinkWriteError(f"operator {self.name!r}: {message}")


class CheckpointOperator(OperatorSource):
    """An operator of one of our checkpoints or savepoints."""

    def __init__(self, source: CompletedCheckpoint, op: OperatorEntry) -> None:
        self.source, self.op = source, op
        self.name, self.operator_id = op.uid, operator_id(op.uid)
        self.parallelism, self.max_parallelism = op.parallelism, op.max_parallelism
        if any(s.raw_keyed or s.raw_operator for s in op.subtasks):
            raise self.refuse("raw state cannot be written to a Flink savepoint yet; leave the operator out")
        self.key_type = op.key_type if op.keyed_states else None
        if self.key_type is not None:
            key_snapshot(self.key_type, f"operator {op.uid!r}: the key")
            check_key_type(self.key_type, f"operator {op.uid!r}: the key")
        for info in op.operator_states:
            broadcast = info.mode is OperatorStateMode.BROADCAST
            what = f"operator {op.uid!r}, operator state {info.name!r}"
            check_types(what, info.value_type, info.user_key_type, broadcast)
        self.states = tuple(self._spec(m) for m in op.keyed_states)

    def _spec(self, meta: StateMetaInfo) -> KeyedStateSpec:
        what = f"operator {self.name!r}, state {meta.name!r}"
        namespace = namespace_of(meta.namespace_type, what)
        if is_timer_queue(meta):
            return KeyedStateSpec(meta.name, "PRIORITY_QUEUE", TIMESTAMP, namespace=namespace)
        spec = KeyedStateSpec(
            meta.name, meta.kind.name, meta.value_type, meta.user_key_type, self._ttl(meta), namespace
        )
        spec.value_snapshot(what)  # refuses types Flink's built-in serializers do not cover
        return spec

    def _ttl(self, meta: StateMetaInfo) -> bool:
        """Whether ``meta`` has TTL; refuses what Flink cannot restore (event-time TTL)."""
        what = f"operator {self.name!r}, state {meta.name!r}"
        config = meta.ttl
        ttl = config is not None and config.is_enabled()
        if (
            config is not None
            and ttl
            and config.time_characteristic is not TtlTimeCharacteristic.ProcessingTime
        ):
            raise UnsupportedFlinkWriteError(f"{what}: event-time TTL has no Flink equivalent")
        return ttl

    def keyed_columns(self, index: int) -> Iterator[tuple[int, StateColumns]]:
        meta, key_type = self.op.keyed_states[index], self.op.key_type
        assert key_type is not None
        timers = self.states[index].is_timer
        for kg, tables in self.source.read_keyed(self.op.uid, meta.name):
            columns = merge_keyed(tables, meta, key_type, self.source.allow_pickle)
            yield kg, timer_columns(columns) if timers else columns

    def operator_states(self) -> list[list[OperatorStateData]]:
        return self.source.operator_states(self.op.uid)
