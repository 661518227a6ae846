"""Running a process function over a keyed backend: contexts, timers, output, failures.

:class:`KeyedProcessOperator` is what the Spark runner and the test harness share. It
holds one subtask's keyed backend (with TTL states and incremental cleanup as their
descriptors ask), its operator state (broadcast state) and both timer queues. Output rows
go to ``operator.output``; the caller drains it. With ``watermark_delay`` set, elements move the watermark as
Flink's bounded-out-of-orderness watermarks do (to the largest event time seen minus the
delay minus one, before the element), firing due event-time timers on the way; without
it, only :meth:`advance_watermark` moves it. Every exception a user function raises
becomes a :class:`ProcessFunctionError` naming the key and the subtask.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from itertools import repeat
from types import ModuleType
from typing import Any, TypeVar, cast

from ..descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from ..errors import InvalidArgumentError, ProcessFunctionError
from ..interfaces import AggregatingState, ListState, MapState, ReducingState, ValueState
from ..keyed.backend import AbstractKeyedStateBackend
from ..operator import BroadcastState, OperatorStateBackend
from ..ttl.time import LONG_MIN, TtlTimeProvider, WallClockTimeProvider
from .functions import (
    BroadcastContext,
    KeyedBroadcastProcessFunction,
    KeyedProcessFunction,
    OnTimerContext,
    ProcessFunction,
    ReadOnlyBroadcastState,
    ReadOnlyContext,
    RuntimeContext,
    TimerService,
)
from .timers import TimeDomain, TimerQueue

LONG_MAX = (1 << 63) - 1
T = TypeVar("T", bound=tuple[Any, ...])
_loop: ModuleType | None
try:
    from . import _loop
except ImportError:  # the C accelerator is optional
    _loop = None
_process_keyed = None if _loop is None else _loop.process_keyed
_rows = None if _loop is None else _loop.rows


def element_rows(cls: type[T], columns: Sequence[list[Any]]) -> Iterator[T]:
    """Rows of ``cls`` (a tuple subclass, e.g. a ``Row`` class) from equally long
    ``columns``, built as :meth:`KeyedProcessOperator.process_elements` consumes them
    (rows die young: no GC cost); by ``tuple.__new__``, so no per-row ``__init__`` runs."""
    if _rows is not None:
        return cast("Iterator[T]", _rows(cls, columns))
    return map(partial(tuple.__new__, cls), zip(*columns, strict=True))


class _Timers:
    """The timer service (a :class:`TimerService`). Registering and deleting are the
    timer queues' own methods: a function that registers a timer for every element calls
    the queue directly (in C where built), with no call in between."""

    register_processing_time_timer: Callable[[int], None]
    register_event_time_timer: Callable[[int], None]
    delete_processing_time_timer: Callable[[int], None]
    delete_event_time_timer: Callable[[int], None]

    def __init__(self, op: KeyedProcessOperator) -> None:
        self._op = op
        self.register_processing_time_timer = op.processing_timers.register
        self.register_event_time_timer = op.event_timers.register
        self.delete_processing_time_timer = op.processing_timers.delete
        self.delete_event_time_timer = op.event_timers.delete

    def current_processing_time(self) -> int:
        return self._op.clock.current_timestamp()

    def current_watermark(self) -> int:
        return self._op.backend.current_watermark


TimerService.register(_Timers)


class _Runtime(RuntimeContext):
    def __init__(self, op: KeyedProcessOperator) -> None:
        self._op = op

    def get_state(self, state_descriptor: ValueStateDescriptor) -> ValueState[Any]:
        return self._op.backend.get_state(state_descriptor)

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState[Any]:
        return self._op.backend.get_list_state(state_descriptor)

    def get_map_state(self, state_descriptor: MapStateDescriptor) -> MapState[Any, Any]:
        return self._op.backend.get_map_state(state_descriptor)

    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> ReducingState[Any]:
        return self._op.backend.get_reducing_state(state_descriptor)

    def get_aggregating_state(
        self, state_descriptor: AggregatingStateDescriptor
    ) -> AggregatingState[Any, Any]:
        return self._op.backend.get_aggregating_state(state_descriptor)

    def get_index_of_this_subtask(self) -> int:
        return self._op.subtask

    def get_number_of_parallel_subtasks(self) -> int:
        return self._op.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._op.backend.max_parallelism


class _ReadOnlyBroadcast(ReadOnlyBroadcastState):
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


class _ElementContext(ReadOnlyContext, OnTimerContext):
    """The one context of keyed elements and timers (its fields change per call)."""

    def __init__(self, op: KeyedProcessOperator) -> None:
        self._op = op
        self._key = op.backend.key_context
        self._timers = _Timers(op)
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
        return _ReadOnlyBroadcast(self._op.operator_state.get_broadcast_state(state_descriptor))


class _BroadcastContext(BroadcastContext):
    def __init__(self, op: KeyedProcessOperator) -> None:
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


class KeyedProcessOperator:
    """One subtask of a keyed process function; see the module docstring."""

    def __init__(
        self,
        function: ProcessFunction,
        backend: AbstractKeyedStateBackend,
        operator_state: OperatorStateBackend | None = None,
        *,
        subtask: int = 0,
        parallelism: int = 1,
        clock: TtlTimeProvider | None = None,
        watermark_delay: int | None = None,
    ) -> None:
        if not isinstance(function, KeyedProcessFunction | KeyedBroadcastProcessFunction):
            raise InvalidArgumentError(
                f"expected a KeyedProcessFunction or KeyedBroadcastProcessFunction, got {function!r}",
                code="INVALID_FUNCTION",
            )
        self.function = function
        self.backend = backend
        self.operator_state = operator_state if operator_state is not None else OperatorStateBackend()
        self.subtask = subtask
        self.parallelism = parallelism
        self.clock: TtlTimeProvider = clock if clock is not None else WallClockTimeProvider()
        self.event_timers = TimerQueue(backend, TimeDomain.EVENT_TIME)
        self.processing_timers = TimerQueue(backend, TimeDomain.PROCESSING_TIME)
        self.output: list[Any] = []
        self._ctx = _ElementContext(self)
        self._bctx = _BroadcastContext(self)
        self._opened = False
        self._watermark_delay = watermark_delay

    def use(self, function: ProcessFunction, *, watermark_delay: int | None = None) -> None:
        """Run ``function`` with ``watermark_delay`` from now on (a new run on a kept backend
        gives every per-run setting again, as the constructor takes them); closes the old one."""
        if not isinstance(function, KeyedProcessFunction | KeyedBroadcastProcessFunction):
            raise InvalidArgumentError(
                f"expected a process function, got {function!r}", code="INVALID_FUNCTION"
            )
        self.close()
        self.function = function
        self._watermark_delay = watermark_delay

    @property
    def is_broadcast(self) -> bool:
        return isinstance(self.function, KeyedBroadcastProcessFunction)

    def _fail(self, what: str, exc: Exception, keyed: bool = True) -> ProcessFunctionError:
        key = f" for key {self.backend.get_current_key()!r}" if keyed else ""
        return ProcessFunctionError(
            f"{type(self.function).__name__}.{what} failed{key} on subtask {self.subtask} "
            f"of {self.parallelism}: {type(exc).__name__}: {exc}"
        )

    def _emit(self, result: Iterable[Any] | None) -> None:
        if result is not None:
            self.output.extend(result)

    def open(self) -> None:
        """Call the function's ``open`` (once)."""
        if self._opened:
            return
        self._opened = True
        try:
            self.function.open(_Runtime(self))
        except Exception as exc:
            raise self._fail("open", exc, keyed=False) from exc

    def process_element(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        """One keyed element; output rows are appended to ``output``."""
        self.process_elements((key,), (value,), (timestamp,))

    def process_elements(
        self, keys: Sequence[Any], values: Iterable[Any], timestamps: Iterable[int | None] | None = None
    ) -> None:
        """:meth:`process_element` of ``(keys[i], values[i], timestamps[i])`` for every ``i``,
        in order: the per-record loop, with the per-call lookups hoisted out of it. ``values``
        may be an iterator: elements built as they are consumed die young (no GC cost).
        The C accelerator runs the same loop (its key setter per the backend's
        ``key_setter_spec``); this Python loop is its model and its fallback."""
        backend = self.backend
        spec = backend.key_setter_spec
        if _process_keyed is not None and spec is not None:
            _process_keyed(
                spec,
                backend.set_current_key,
                keys,
                values,
                timestamps,
                self.function.process_element,
                self._ctx,
                self.output,
                partial(self._fail, "process_element"),
                self._watermark_delay,
                backend.current_watermark,
                self._advance_for,
            )
            return
        set_key = backend.set_current_key
        function = self.function.process_element
        ctx = self._ctx
        output = self.output  # the list timers fired on the way append to as well
        delay = self._watermark_delay
        watermark = backend.current_watermark  # only advance_watermark below moves it
        stamps = repeat(None, len(keys)) if timestamps is None else timestamps
        for key, value, timestamp in zip(keys, values, stamps, strict=True):
            if timestamp is not None and delay is not None:
                due = timestamp - delay - 1
                if due > watermark:
                    self.advance_watermark(due)
                    watermark = backend.current_watermark
            set_key(key)
            ctx.ts = timestamp
            try:
                result = function(value, ctx)
                if result is not None:
                    output.extend(result)
            except Exception as exc:
                raise self._fail("process_element", exc) from exc

    def process_broadcast_element(self, value: Any, timestamp: int | None = None) -> None:
        """One broadcast element (the function must be a KeyedBroadcastProcessFunction)."""
        function = self.function
        if not isinstance(function, KeyedBroadcastProcessFunction):
            raise InvalidArgumentError(
                f"broadcast elements need a KeyedBroadcastProcessFunction, not {type(function).__name__}",
                code="INVALID_FUNCTION",
            )
        self._bctx.ts = timestamp
        try:
            self._emit(function.process_broadcast_element(value, self._bctx))
        except Exception as exc:
            raise self._fail("process_broadcast_element", exc, keyed=False) from exc

    def _fire(self, queue: TimerQueue, time: int) -> int:
        ctx = self._ctx
        ctx.domain = queue.domain
        fired = 0
        for timestamp, _ in queue.pop_due(time):
            ctx.ts = timestamp
            fired += 1
            try:
                self._emit(self.function.on_timer(timestamp, ctx))
            except Exception as exc:
                raise self._fail("on_timer", exc) from exc
        return fired

    def _advance_for(self, due: int) -> int:
        """An element moved the watermark to ``due``: advance it, return where it is."""
        self.advance_watermark(due)
        return self.backend.current_watermark

    def advance_watermark(self, watermark: int) -> int:
        """Event time moves to ``watermark`` (never back): event-time TTL follows it and
        every event-time timer at or before it fires. Returns the number fired."""
        if watermark < self.backend.current_watermark:
            watermark = self.backend.current_watermark
        self.backend.advance_watermark(watermark)
        return self._fire(self.event_timers, watermark)

    def advance_processing_time(self) -> int:
        """Fire every processing-time timer at or before the clock's now."""
        return self._fire(self.processing_timers, self.clock.current_timestamp())

    def end_of_input(self) -> int:
        """A bounded input ended: every event-time timer fires, as at Flink's MAX_WATERMARK.

        The watermark itself stays where it is, so event-time TTL does not expire
        everything, and a later run continues from it."""
        return self._fire(self.event_timers, LONG_MAX)

    @property
    def current_watermark(self) -> int:
        return self.backend.current_watermark

    def drain(self) -> list[Any]:
        """The output collected so far (and forget it)."""
        out, self.output = self.output, []
        return out

    def close(self) -> None:
        """Call the function's ``close``."""
        if self._opened:
            self._opened = False
            try:
                self.function.close()
            except Exception as exc:
                raise self._fail("close", exc, keyed=False) from exc


__all__ = ["LONG_MAX", "LONG_MIN", "KeyedProcessOperator", "element_rows"]
