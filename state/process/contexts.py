"""The contexts a process function is called with, over one operator (what they read of
it is :class:`Host`, which ``KeyedProcessOperator`` is): the runtime context of ``open``,
the element/timer context, the broadcast context, the timer service and the read-only view
of a broadcast state."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, cast

from ..descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from ..errors import InvalidArgumentError
from ..interfaces import AggregatingState, ListState, MapState, ReducingState, ValueState
from ..keyed.backend import AbstractKeyedStateBackend
from ..operator import BroadcastState, OperatorStateBackend
from ..ttl.time import TtlTimeProvider
from .functions import (
    BroadcastContext,
    BroadcastOnTimerContext,
    ReadOnlyBroadcastState,
    RuntimeContext,
    TimerService,
)
from .metrics import MetricGroup
from .timers import TimeDomain, TimerQueue


class Host(Protocol):
    """What the contexts read of the operator they run in."""

    backend: AbstractKeyedStateBackend
    operator_state: OperatorStateBackend
    clock: TtlTimeProvider
    event_timers: TimerQueue
    processing_timers: TimerQueue
    subtask: int
    parallelism: int
    task_name: str
    attempt_number: int
    job_parameters: Mapping[str, str]
    metrics: MetricGroup

    def open_function(self, function: object, runtime_context: RuntimeContext) -> None: ...


class Timers:
    """The timer service (a :class:`TimerService`). Registering and deleting are the
    timer queues' own methods: a function that registers a timer for every element calls
    the queue directly (in C where built), with no call in between."""

    register_processing_time_timer: Callable[[int], None]
    register_event_time_timer: Callable[[int], None]
    delete_processing_time_timer: Callable[[int], None]
    delete_event_time_timer: Callable[[int], None]

    def __init__(self, op: Host) -> None:
        self._op = op
        self.register_processing_time_timer = op.processing_timers.register
        self.register_event_time_timer = op.event_timers.register
        self.delete_processing_time_timer = op.processing_timers.delete
        self.delete_event_time_timer = op.event_timers.delete

    def current_processing_time(self) -> int:
        return self._op.clock.current_timestamp()

    def current_watermark(self) -> int:
        return self._op.backend.current_watermark


TimerService.register(Timers)


class Runtime(RuntimeContext):
    def __init__(self, op: Host) -> None:
        self._op = op

    def get_state(self, state_descriptor: ValueStateDescriptor) -> ValueState[Any]:
        return self._op.backend.get_state(state_descriptor)

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState[Any]:
        return self._op.backend.get_list_state(state_descriptor)

    def get_map_state(self, state_descriptor: MapStateDescriptor) -> MapState[Any, Any]:
        return self._op.backend.get_map_state(state_descriptor)

    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> ReducingState[Any]:
        self._op.open_function(state_descriptor.reduce_function, self)
        return self._op.backend.get_reducing_state(state_descriptor)

    def get_aggregating_state(
        self, state_descriptor: AggregatingStateDescriptor
    ) -> AggregatingState[Any, Any]:
        self._op.open_function(state_descriptor.agg_function, self)
        return self._op.backend.get_aggregating_state(state_descriptor)

    def get_index_of_this_subtask(self) -> int:
        return self._op.subtask

    def get_number_of_parallel_subtasks(self) -> int:
        return self._op.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._op.backend.max_parallelism

    def get_task_name(self) -> str:
        return self._op.task_name

    def get_task_name_with_subtasks(self) -> str:
        op = self._op
        return f"{op.task_name} ({op.subtask + 1}/{op.parallelism})#{op.attempt_number}"

    def get_attempt_number(self) -> int:
        return self._op.attempt_number

    def get_job_parameter(self, key: str, default_value: str) -> str:
        return self._op.job_parameters.get(key, default_value)

    def get_metrics_group(self) -> MetricGroup:
        return self._op.metrics


class ReadOnlyBroadcastView(ReadOnlyBroadcastState):
    def __init__(self, state: BroadcastState) -> None:
        self._state = state

    def get(self, key: Any) -> Any:
        return self._state.get(key)

    def contains(self, key: Any) -> bool:
        return self._state.contains(key)

    def items(self) -> Iterable[tuple[Any, Any]]:
        return self._state.items()

    def keys(self) -> Iterable[Any]:
        return self._state.keys()

    def values(self) -> Iterable[Any]:
        return self._state.values()

    def is_empty(self) -> bool:
        return self._state.is_empty()


class ElementContext(BroadcastOnTimerContext):
    """The one context of keyed elements and timers (its fields change per call)."""

    def __init__(self, op: Host) -> None:
        self._op = op
        self._key = op.backend.key_context
        self._timers = Timers(op)
        self.ts: int | None = None
        self.domain = TimeDomain.EVENT_TIME

    def get_current_key(self) -> Any:
        return self._key.key

    def timestamp(self) -> int | None:
        return self.ts

    def timer_service(self) -> TimerService:
        return cast("TimerService", self._timers)

    def time_domain(self) -> TimeDomain:
        return self.domain

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> ReadOnlyBroadcastState:
        return ReadOnlyBroadcastView(self._op.operator_state.get_broadcast_state(state_descriptor))

    def current_processing_time(self) -> int:
        return self._op.clock.current_timestamp()

    def current_watermark(self) -> int:
        return self._op.backend.current_watermark


class BroadcastElementContext(BroadcastContext):
    def __init__(self, op: Host) -> None:
        self._op = op
        self.ts: int | None = None

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> MapState[Any, Any]:
        return self._op.operator_state.get_broadcast_state(state_descriptor)

    def apply_to_keyed_state(self, state_descriptor: Any, function: Any) -> None:
        if not isinstance(state_descriptor, StateDescriptor):
            raise InvalidArgumentError(f"expected a state descriptor, got {state_descriptor!r}")
        self._op.backend.apply_to_all_keys(None, state_descriptor, function)

    def timestamp(self) -> int | None:
        return self.ts

    def current_processing_time(self) -> int:
        return self._op.clock.current_timestamp()

    def current_watermark(self) -> int:
        return self._op.backend.current_watermark
