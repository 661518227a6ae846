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

from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from itertools import repeat
from types import ModuleType
from typing import Any, TypeVar, cast

from ..errors import InvalidArgumentError, ProcessFunctionError
from ..keyed.backend import AbstractKeyedStateBackend
from ..operator import OperatorStateBackend
from ..ttl.time import LONG_MIN, TtlTimeProvider, WallClockTimeProvider
from .contexts import BroadcastElementContext, ElementContext, Runtime
from .functions import (
    Function,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    ProcessFunction,
    RuntimeContext,
)
from .metrics import MetricGroup
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
        task_name: str | None = None,
        attempt_number: int = 0,
        job_parameters: Mapping[str, str] | None = None,
    ) -> None:
        self.backend = backend
        self.operator_state = operator_state if operator_state is not None else OperatorStateBackend()
        self.subtask = subtask
        self.parallelism = parallelism
        self.clock: TtlTimeProvider = clock if clock is not None else WallClockTimeProvider()
        self.event_timers = TimerQueue(backend, TimeDomain.EVENT_TIME)
        self.processing_timers = TimerQueue(backend, TimeDomain.PROCESSING_TIME)
        self.output: list[Any] = []
        self._ctx = ElementContext(self)
        self._bctx = BroadcastElementContext(self)
        self._opened = False
        self._opened_functions: list[Function] = []
        self._configure(function, watermark_delay, task_name, attempt_number, job_parameters)

    def _configure(
        self,
        function: ProcessFunction,
        watermark_delay: int | None,
        task_name: str | None,
        attempt_number: int,
        job_parameters: Mapping[str, str] | None,
    ) -> None:
        """Take one run's settings (a fresh metric group with them)."""
        if not isinstance(function, ProcessFunction):
            raise InvalidArgumentError(
                "expected a KeyedProcessFunction, KeyedBroadcastProcessFunction or KeyedCoProcessFunction, "
                f"got {function!r}",
                code="INVALID_FUNCTION",
            )
        self.function = function
        self._watermark_delay = watermark_delay
        self.task_name = task_name if task_name is not None else type(function).__name__
        self.attempt_number = attempt_number
        self.job_parameters: Mapping[str, str] = dict(job_parameters or {})
        self.metrics = MetricGroup()

    def open_function(self, function: object, runtime_context: RuntimeContext) -> None:
        """Open a state's reduce or aggregate function (once; closed with the operator)."""
        if isinstance(function, Function) and all(f is not function for f in self._opened_functions):
            self._opened_functions.append(function)
            function.open(runtime_context)

    def use(
        self,
        function: ProcessFunction,
        *,
        watermark_delay: int | None = None,
        task_name: str | None = None,
        attempt_number: int = 0,
        job_parameters: Mapping[str, str] | None = None,
    ) -> None:
        """Run ``function`` with these settings from now on (a new run on a kept backend
        gives every per-run setting again, as the constructor takes them); closes the old
        one and starts a new metric group."""
        self.close()
        self._configure(function, watermark_delay, task_name, attempt_number, job_parameters)

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
            self.function.open(Runtime(self))
        except Exception as exc:
            raise self._fail("open", exc, keyed=False) from exc

    def process_element(self, key: Any, value: Any, timestamp: int | None = None, input: int = 0) -> None:
        """One keyed element; output rows are appended to ``output``."""
        self.process_elements((key,), (value,), (timestamp,), input)

    def _element_method(self, input: int) -> str:
        """The function's method for elements of ``input`` (0: the one keyed input; 1 or 2:
        an input of a :class:`KeyedCoProcessFunction`)."""
        two = isinstance(self.function, KeyedCoProcessFunction)
        if two != (input in (1, 2)) or input not in (0, 1, 2):
            raise InvalidArgumentError(
                f"{type(self.function).__name__} takes elements of "
                f"{'input 1 or 2 (process_element1/2)' if two else 'one input'}, not of input {input!r}",
                code="INVALID_FUNCTION",
            )
        return f"process_element{input or ''}"

    def process_elements(
        self,
        keys: Sequence[Any],
        values: Iterable[Any],
        timestamps: Iterable[int | None] | None = None,
        input: int = 0,
    ) -> None:
        """:meth:`process_element` of ``(keys[i], values[i], timestamps[i])`` for every ``i``,
        in order: the per-record loop, with the per-call lookups hoisted out of it. ``values``
        may be an iterator: elements built as they are consumed die young (no GC cost).
        ``input`` is 1 or 2 for the inputs of a :class:`KeyedCoProcessFunction` (its
        ``process_element1``/``2``), else 0.
        The C accelerator runs the same loop (its key setter per the backend's
        ``key_setter_spec``); this Python loop is its model and its fallback."""
        method = self._element_method(input)
        backend = self.backend
        spec = backend.key_setter_spec
        if _process_keyed is not None and spec is not None:
            _process_keyed(
                spec,
                backend.set_current_key,
                keys,
                values,
                timestamps,
                getattr(self.function, method),
                self._ctx,
                self.output,
                partial(self._fail, method),
                self._watermark_delay,
                backend.current_watermark,
                self._advance_for,
            )
            return
        set_key = backend.set_current_key
        function = getattr(self.function, method)
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
                raise self._fail(method, exc) from exc

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
        """Call the function's ``close``, then that of the state functions it opened."""
        if self._opened:
            self._opened = False
            functions, self._opened_functions = [self.function, *self._opened_functions], []
            try:
                for function in functions:
                    function.close()
            except Exception as exc:
                raise self._fail("close", exc, keyed=False) from exc


__all__ = ["LONG_MAX", "LONG_MIN", "KeyedProcessOperator", "element_rows"]
