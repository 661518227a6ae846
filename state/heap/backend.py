"""The heap keyed state backend: every state in Python dicts, per key group."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from ..descriptors import (
    AggregatingStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
)
from ..interfaces import InternalKvState, StateIncrementalVisitor
from ..keyed.backend import AbstractKeyedStateBackend
from ..keyed.migration import Migrate
from ..keyed.snapshot import Changed, ColumnTransform, KeyedStateSnapshot, StateColumns, StateMetaInfo
from ..keygroups.assignment import KeyGroupRange
from ..serializers.lookup import serializer_for
from ..ttl.factory import clock as ttl_clock
from ..ttl.factory import snapshot_transform
from ..types.canonical import canonicalizer
from ..types.mapping import ListTypeInfo, MapTypeInfo, TypeInformation
from .aggregating_state import HeapAggregatingState
from .base import AbstractHeapState
from .cow_map import CopyOnWriteStateMap
from .list_state import HeapListState
from .map_state import HeapFloatKeyMapState, HeapMapState
from .mutable_reads import (
    MutableAggregatingState,
    MutableFloatKeyMapState,
    MutableListState,
    MutableMapState,
    MutableReducingState,
    MutableValueState,
    hands_out_mutable,
)
from .nested_map import NestedStateMap
from .reducing_state import HeapReducingState
from .restore import stored_migration, stored_states, stored_type_of
from .state_map import CopyFn, StateMap
from .state_table import HeapIncrementalVisitor, StateTable, _GuardMap
from .value_state import HeapValueState


def stored_type(desc: StateDescriptor) -> TypeInformation:
    """The type of what one entry of a state map holds for ``desc``."""
    if desc.kind is StateKind.LIST:
        return ListTypeInfo(desc.type_info)
    if isinstance(desc, MapStateDescriptor):
        return MapTypeInfo(desc.key_type_info, desc.type_info)
    return desc.type_info


def copy_function(type_info: TypeInformation) -> CopyFn | None:
    """How to copy a stored state for copy-on-write (``None``: immutable, never copied)."""
    serializer = serializer_for(type_info)
    return None if serializer.immutable else serializer.copy


class HeapKeyedStateBackend(AbstractKeyedStateBackend):
    """Keyed state on the heap.

    ``async_snapshots=True`` stores each key group in a :class:`CopyOnWriteStateMap`
    (incremental rehash, snapshots that stay consistent while writes go on);
    ``False`` in a :class:`NestedStateMap` (nested dicts, synchronous snapshots).
    """

    def __init__(
        self,
        key_type: Any = None,
        max_parallelism: int = 128,
        key_group_range: KeyGroupRange | None = None,
        time_provider: Any = None,
        async_snapshots: bool = True,
    ) -> None:
        super().__init__(key_type, max_parallelism, key_group_range, time_provider)
        self.async_snapshots = async_snapshots
        self._create_map: Callable[[CopyFn | None], StateMap] = (
            CopyOnWriteStateMap if async_snapshots else NestedStateMap
        )
        self._guard = _GuardMap(lambda: self._closed)
        self._tables: dict[str, StateTable] = {}

    def _table_for(self, meta: StateMetaInfo, copy_state: CopyFn | None) -> StateTable:
        table = self._tables.get(meta.name)
        if table is None:
            table = StateTable(meta, self.key_group_range, self._create_map, copy_state, self._guard)
            if self.change_log.recording:
                table.record_changes()
            self._tables[meta.name] = table
        return table

    def _create_internal_state(
        self,
        desc: StateDescriptor,
        meta: StateMetaInfo,
        transform: Callable[[], ColumnTransform] | None = None,
    ) -> InternalKvState:
        table = self._table_for(meta, copy_function(stored_type(desc)))
        table.meta = meta
        if transform is not None:
            table.transform_factory = transform
        mutable = hands_out_mutable(desc)  # its reads record the scope: see mutable_reads
        if isinstance(desc, ReducingStateDescriptor):
            reducing = MutableReducingState if mutable else HeapReducingState
            return reducing(table, self._ctx, desc.reduce)
        if isinstance(desc, AggregatingStateDescriptor):
            aggregating = MutableAggregatingState if mutable else HeapAggregatingState
            return aggregating(table, self._ctx, desc.agg_function)
        canon = canonicalizer(meta.user_key_type) if meta.kind is StateKind.MAP else None
        if canon is not None:
            float_keys = MutableFloatKeyMapState if mutable else HeapFloatKeyMapState
            return float_keys(table, self._ctx, canon)
        kinds: dict[StateKind, tuple[type[AbstractHeapState], type[AbstractHeapState]]] = {
            StateKind.VALUE: (HeapValueState, MutableValueState),
            StateKind.LIST: (HeapListState, MutableListState),
            StateKind.MAP: (HeapMapState, MutableMapState),
        }
        return kinds[meta.kind][mutable](table, self._ctx)

    def _restore_columns(self, meta: StateMetaInfo, kgi: int, columns: StateColumns) -> None:
        if meta.name not in self._tables:
            table = self._table_for(meta, copy_function(stored_type_of(meta)))
            table.set_namespace_type(meta.namespace_type)
            if meta.ttl is not None:
                now = ttl_clock(self, meta.ttl)
                table.transform_factory = snapshot_transform(meta.kind, meta.ttl, now)
        state_map = self._tables[meta.name].maps[kgi]
        namespaces = columns.namespaces or [None] * len(columns.keys)
        state_map.reserve(len(columns.keys))
        for key, ns, stored in zip(columns.keys, namespaces, stored_states(meta, columns), strict=True):
            state_map.put(key, ns, stored)

    def _bind_restored(
        self, restored: StateMetaInfo, meta: StateMetaInfo, value: Migrate | None, user_key: Migrate | None
    ) -> None:
        table = self._tables[restored.name]
        migrate = stored_migration(restored, value, user_key)
        if migrate is not None:
            for state_map in table.maps:
                for key, ns, stored in list(state_map.entries()):
                    state_map.put(key, ns, migrate(stored))
        table.set_copy_state(copy_function(stored_type_of(meta)))

    def table(self, state_name: str) -> StateTable:
        """The state table of ``state_name`` (for decorators, tests and tools)."""
        self.state_meta(state_name)
        return self._tables[state_name]

    def _incremental_visitor(self, state_name: str) -> StateIncrementalVisitor:
        return HeapIncrementalVisitor(self._tables[state_name])

    def _keys(self, state_name: str, namespace: Any) -> Iterator[Any]:
        return self._tables[state_name].keys(namespace)

    def snapshot(self) -> KeyedStateSnapshot:
        self._check_open()
        key_is_tuple = self._key_pytype is tuple
        states = {name: table.snapshot(key_is_tuple) for name, table in self._tables.items()}
        return KeyedStateSnapshot(self._key_type, self._max_p, self.key_group_range, states)

    def _start_recording(self) -> None:
        for table in self._tables.values():
            table.record_changes()

    def _take_increment(
        self, base_metas: Mapping[str, StateMetaInfo] | None, freeze: Collection[str]
    ) -> tuple[KeyedStateSnapshot, dict[str, Changed]]:
        """One pass over the tables, each record taken with its snapshot (as its changes
        only where :meth:`StateTable.snapshot` can: the record is then the increment)."""
        key_is_tuple = self._key_pytype is tuple
        states, taken = {}, {}
        for name, table in self._tables.items():
            changed = table.record_changes()
            if changed is not None:
                taken[name] = changed
            base = None if base_metas is None or name in freeze else base_metas.get(name)
            states[name] = table.snapshot(key_is_tuple, base)
        return KeyedStateSnapshot(self._key_type, self._max_p, self.key_group_range, states), taken

    def close(self) -> None:
        super().close()
        self._tables.clear()
        self._states.clear()
        self._metas.clear()
