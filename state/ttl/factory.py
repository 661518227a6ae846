"""Creates a TTL state: the backend's state of TtlValues wrapped by a decorator, once.

Backends do not know about TTL: they get a descriptor whose values are
``(timestamp, value)`` tuples, a transform that turns stored entries into snapshot
entries (dropping expired ones when ``cleanup_full_snapshot`` is set), and may offer an
incremental visitor for background cleanup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
    ValueStateDescriptor,
)
from ..interfaces import InternalKvState, StateIncrementalVisitor
from ..keyed.snapshot import ColumnTransform, StateColumns, StateMetaInfo
from ..types.mapping import BasicTypeInfo, RowTypeInfo, TypeInformation
from .base import AbstractTtlState, TtlContext
from .cleanup import TtlIncrementalCleanup
from .config import StateTtlConfig, TtlTimeCharacteristic
from .functions import TtlAggregateFunction, TtlReduceFunction
from .states import (
    TtlAggregatingState,
    TtlListState,
    TtlMapState,
    TtlReducingState,
    TtlValueState,
)
from .time import TtlTimeProvider, WallClockTimeProvider, WatermarkTimeProvider


class TtlBackend(Protocol):
    """What TTL uses of the keyed backend that creates a state: its clocks, its one hook,
    its entry walk and its key-selection listeners."""

    @property
    def time_provider(self) -> TtlTimeProvider | None: ...

    @property
    def watermark_provider(self) -> WatermarkTimeProvider: ...

    def _create_internal_state(
        self,
        desc: StateDescriptor,
        meta: StateMetaInfo,
        transform: Callable[[], ColumnTransform] | None = None,
    ) -> InternalKvState: ...

    def _incremental_visitor(self, state_name: str) -> StateIncrementalVisitor | None: ...

    def register_key_selection_listener(self, listener: Callable[[], None]) -> None: ...


_DECORATORS: dict[StateKind, type[AbstractTtlState]] = {
    StateKind.VALUE: TtlValueState,
    StateKind.LIST: TtlListState,
    StateKind.MAP: TtlMapState,
    StateKind.REDUCING: TtlReducingState,
    StateKind.AGGREGATING: TtlAggregatingState,
}


def ttl_value_type(value_type: TypeInformation) -> TypeInformation:
    """The stored type: Flink's TtlValue, a (LONG timestamp, value) tuple."""
    return RowTypeInfo((BasicTypeInfo("LONG"), value_type), ("ts", "value"), "TUPLE")


def clock(backend: TtlBackend, config: StateTtlConfig) -> Callable[[], int]:
    """The function giving "now": the backend's time provider, or its watermark."""
    if config.time_characteristic is TtlTimeCharacteristic.EventTime:
        return backend.watermark_provider.current_timestamp
    provider = backend.time_provider or WallClockTimeProvider()
    return provider.current_timestamp


def _raw_descriptor(desc: StateDescriptor, ttl: TtlContext) -> StateDescriptor:
    stored = ttl_value_type(desc.type_info)
    if isinstance(desc, ReducingStateDescriptor):
        return ReducingStateDescriptor(desc.name, TtlReduceFunction(desc.reduce, ttl), stored)
    if isinstance(desc, AggregatingStateDescriptor):
        return AggregatingStateDescriptor(desc.name, TtlAggregateFunction(desc.agg_function, ttl), stored)
    if isinstance(desc, ListStateDescriptor):
        return ListStateDescriptor(desc.name, stored)
    if isinstance(desc, MapStateDescriptor):
        return MapStateDescriptor(desc.name, desc.key_type_info, stored)
    return ValueStateDescriptor(desc.name, stored)


def _select(items: list[Any], mask: list[bool]) -> list[Any]:
    return [x for x, keep in zip(items, mask, strict=True) if keep]


def snapshot_transform(
    kind: StateKind, config: StateTtlConfig, now: Callable[[], int]
) -> Callable[[], ColumnTransform]:
    """At each snapshot: split TtlValues into values and timestamps; with full-snapshot
    cleanup, leave out what has expired (judged at the time of the snapshot)."""

    def factory() -> ColumnTransform:
        cutoff = now() - config.ttl_ms if config.cleanup_strategies.full_snapshot else None

        def whole(keys: list[Any], nss: list[Any] | None, states: list[Any]) -> StateColumns:
            if cutoff is not None:
                mask = [s[0] > cutoff for s in states]
                if not all(mask):
                    keys, states = _select(keys, mask), _select(states, mask)
                    nss = None if nss is None else _select(nss, mask)
            return StateColumns(keys, nss, [s[1] for s in states], [s[0] for s in states])

        def elements(keys: list[Any], nss: list[Any] | None, states: list[Any]) -> StateColumns:
            if cutoff is not None:
                states = [[e for e in s if e[0] > cutoff] for s in states]
                mask = [bool(s) for s in states]
                if not all(mask):
                    keys, states = _select(keys, mask), _select(states, mask)
                    nss = None if nss is None else _select(nss, mask)
            values = [[e[1] for e in s] for s in states]
            return StateColumns(keys, nss, values, [[e[0] for e in s] for s in states])

        def entries(keys: list[Any], nss: list[Any] | None, states: list[Any]) -> StateColumns:
            if cutoff is not None:
                states = [{k: e for k, e in s.items() if e[0] > cutoff} for s in states]
                mask = [bool(s) for s in states]
                if not all(mask):
                    keys, states = _select(keys, mask), _select(states, mask)
                    nss = None if nss is None else _select(nss, mask)
            values = [{k: e[1] for k, e in s.items()} for s in states]
            return StateColumns(keys, nss, values, [{k: e[0] for k, e in s.items()} for s in states])

        if kind is StateKind.LIST:
            return elements
        return entries if kind is StateKind.MAP else whole

    return factory


def create_ttl_state(backend: TtlBackend, desc: StateDescriptor, meta: StateMetaInfo) -> AbstractTtlState:
    """The TTL decorator over a new backend state for ``desc`` (``meta.ttl`` is set)."""
    config = meta.ttl
    assert config is not None
    now = clock(backend, config)
    ttl = TtlContext(config, now)
    raw = backend._create_internal_state(
        _raw_descriptor(desc, ttl), meta, snapshot_transform(desc.kind, config, now)
    )
    decorator_cls = _DECORATORS[desc.kind]
    access = None
    strategy = config.cleanup_strategies.get_incremental_cleanup_strategy()
    visitor = backend._incremental_visitor(desc.name) if strategy is not None else None
    if strategy is not None and visitor is not None:
        cleanup = TtlIncrementalCleanup(
            visitor,
            strategy.cleanup_size,
            config.ttl_ms,
            decorator_cls.expire,
        )
        access = cleanup.state_accessed
        if strategy.run_cleanup_for_every_record:
            backend.register_key_selection_listener(lambda: cleanup.state_accessed(now()))
    if isinstance(desc, AggregatingStateDescriptor):
        return TtlAggregatingState(raw, ttl, access, desc.agg_function)
    return decorator_cls(raw, ttl, access)
