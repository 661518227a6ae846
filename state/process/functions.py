"""The user-facing function API, with PyFlink's names: ``Function`` and the reduce and
aggregate functions states apply, ``KeyedProcessFunction``, ``KeyedBroadcastProcessFunction``,
``KeyedCoProcessFunction`` and the contexts they are called with.

``process_element`` (``process_element1``/``2``), ``process_broadcast_element`` and
``on_timer`` are generators of
output rows (``yield`` each row; returning ``None`` or an iterable works too).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeAlias, TypeVar

from ..descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from ..interfaces import AggregatingState, ListState, MapState, ReducingState, ValueState
from .metrics import MetricGroup
from .timers import TimeDomain

IN = TypeVar("IN")
ACC = TypeVar("ACC")
OUT = TypeVar("OUT")


class TimerService(ABC):
    """Time and timers of the current key (PyFlink's ``TimerService``)."""

    @abstractmethod
    def current_processing_time(self) -> int: ...

    @abstractmethod
    def current_watermark(self) -> int: ...

    @abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None: ...

    @abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None: ...

    @abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None: ...

    @abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None: ...


class KeyedStateStore(ABC):
    """Where keyed state comes from (PyFlink's ``KeyedStateStore``)."""

    @abstractmethod
    def get_state(self, state_descriptor: ValueStateDescriptor) -> ValueState[Any]: ...

    @abstractmethod
    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState[Any]: ...

    @abstractmethod
    def get_map_state(self, state_descriptor: MapStateDescriptor) -> MapState[Any, Any]: ...

    @abstractmethod
    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> ReducingState[Any]: ...

    @abstractmethod
    def get_aggregating_state(
        self, state_descriptor: AggregatingStateDescriptor
    ) -> AggregatingState[Any, Any]: ...


class RuntimeContext(KeyedStateStore):
    """What ``open`` gets: keyed state of the function and where it runs."""

    @abstractmethod
    def get_index_of_this_subtask(self) -> int: ...

    @abstractmethod
    def get_number_of_parallel_subtasks(self) -> int: ...

    @abstractmethod
    def get_max_number_of_parallel_subtasks(self) -> int: ...

    @abstractmethod
    def get_task_name(self) -> str:
        """The task's name (on Spark, the run's ``uid``)."""

    @abstractmethod
    def get_task_name_with_subtasks(self) -> str:
        """Flink's ``"<name> (<index + 1>/<parallelism>)#<attempt>"``."""

    @abstractmethod
    def get_attempt_number(self) -> int:
        """The attempt of this subtask, from 0 (on Spark, the task's attempt number)."""

    @abstractmethod
    def get_job_parameter(self, key: str, default_value: str) -> str:
        """The job parameter ``key`` (a string), ``default_value`` without one."""

    @abstractmethod
    def get_metrics_group(self) -> MetricGroup:
        """The subtask's metric group (recorded locally, never reported)."""


class Function(ABC):  # noqa: B024 - PyFlink's Function has no abstract method
    """The base of user functions (PyFlink's ``Function``): optional ``open``/``close``."""

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: B027 - optional hook
        """Called once before the function is first used."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Called once after its last use."""


class ReduceFunction(Function):
    """Combines two values into one (PyFlink's ``ReduceFunction``).

    The process operator calls ``open`` when a state of it is first created through the
    runtime context and ``close`` when the operator closes."""

    @abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any: ...


class AggregateFunction(Function, Generic[IN, ACC, OUT]):
    """Folds inputs into an accumulator (PyFlink's ``AggregateFunction``); ``open`` and
    ``close`` are called as for :class:`ReduceFunction`."""

    @abstractmethod
    def create_accumulator(self) -> ACC: ...

    @abstractmethod
    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    @abstractmethod
    def get_result(self, accumulator: ACC) -> OUT: ...

    @abstractmethod
    def merge(self, acc_a: ACC, acc_b: ACC) -> ACC: ...


class Context(ABC):
    """What ``process_element`` gets (``KeyedProcessFunction.Context``)."""

    @abstractmethod
    def get_current_key(self) -> Any: ...

    @abstractmethod
    def timestamp(self) -> int | None:
        """The element's event time (``None`` without one); in ``on_timer``, the timer's time."""

    @abstractmethod
    def timer_service(self) -> TimerService: ...


class OnTimerContext(Context):
    """What ``on_timer`` gets: a context that also says which clock fired."""

    @abstractmethod
    def time_domain(self) -> TimeDomain: ...


class KeyedProcessFunction(Function):
    """Processes the elements of a keyed stream one by one, with keyed state and timers."""

    Context: TypeAlias = Context
    OnTimerContext: TypeAlias = OnTimerContext

    @abstractmethod
    def process_element(self, value: Any, ctx: Context) -> Iterable[Any] | None:
        """Handle one element; yield output rows."""

    def on_timer(self, timestamp: int, ctx: OnTimerContext) -> Iterable[Any] | None:
        """A timer of the current key fired; yield output rows."""
        return None


class ReadOnlyContext(Context):
    """``process_element`` of a broadcast function: broadcast state is read-only here."""

    @abstractmethod
    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> ReadOnlyBroadcastState: ...

    @abstractmethod
    def current_processing_time(self) -> int: ...

    @abstractmethod
    def current_watermark(self) -> int: ...


class BroadcastContext(ABC):
    """``process_broadcast_element``: read-write broadcast state and every key's state."""

    @abstractmethod
    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> MapState[Any, Any]: ...

    @abstractmethod
    def apply_to_keyed_state(self, state_descriptor: Any, function: Any) -> None:
        """Call ``function(key, state)`` for every key with state under ``state_descriptor``."""

    @abstractmethod
    def timestamp(self) -> int | None: ...

    @abstractmethod
    def current_processing_time(self) -> int: ...

    @abstractmethod
    def current_watermark(self) -> int: ...


class ReadOnlyBroadcastState(ABC):
    """The read-only face of a broadcast state (PyFlink's ``ReadOnlyBroadcastState``)."""

    @abstractmethod
    def get(self, key: Any) -> Any: ...

    @abstractmethod
    def contains(self, key: Any) -> bool: ...

    @abstractmethod
    def items(self) -> Iterable[tuple[Any, Any]]: ...

    @abstractmethod
    def keys(self) -> Iterable[Any]: ...

    @abstractmethod
    def values(self) -> Iterable[Any]: ...

    @abstractmethod
    def is_empty(self) -> bool: ...

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __contains__(self, key: object) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        """The keys, as PyFlink's ``ReadOnlyBroadcastState`` iterates."""
        return iter(self.keys())


class BroadcastOnTimerContext(ReadOnlyContext, OnTimerContext):
    """``on_timer`` of a broadcast function: read-only broadcast state, and which clock fired."""


class KeyedBroadcastProcessFunction(Function):
    """Flink's broadcast state pattern: keyed elements read the broadcast state that
    broadcast elements write (every subtask sees every broadcast element)."""

    ReadOnlyContext: TypeAlias = ReadOnlyContext
    Context: TypeAlias = BroadcastContext
    OnTimerContext: TypeAlias = BroadcastOnTimerContext

    @abstractmethod
    def process_element(self, value: Any, ctx: ReadOnlyContext) -> Iterable[Any] | None:
        """Handle one keyed element; yield output rows."""

    @abstractmethod
    def process_broadcast_element(self, value: Any, ctx: BroadcastContext) -> Iterable[Any] | None:
        """Handle one broadcast element (on every subtask); yield output rows."""

    def on_timer(self, timestamp: int, ctx: BroadcastOnTimerContext) -> Iterable[Any] | None:
        return None


class KeyedCoProcessFunction(Function):
    """Processes the elements of two keyed streams connected by the same key: both inputs
    share the function's keyed state and timers (PyFlink's ``KeyedCoProcessFunction``)."""

    Context: TypeAlias = Context
    OnTimerContext: TypeAlias = OnTimerContext

    @abstractmethod
    def process_element1(self, value: Any, ctx: Context) -> Iterable[Any] | None:
        """Handle one element of the first input; yield output rows."""

    @abstractmethod
    def process_element2(self, value: Any, ctx: Context) -> Iterable[Any] | None:
        """Handle one element of the second input; yield output rows."""

    def on_timer(self, timestamp: int, ctx: OnTimerContext) -> Iterable[Any] | None:
        """A timer of the current key fired; yield output rows."""
        return None


ProcessFunction = KeyedProcessFunction | KeyedBroadcastProcessFunction | KeyedCoProcessFunction
