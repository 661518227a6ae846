"""The runner's bulk path (``KeyedProcessOperator.process_elements``) against a model of
the per-element path it replaced: same output, state, timers and watermark on random
inputs with event time, event- and processing-time timers, TTL (incremental cleanup on)
and namedtuple, unicode and int keys; the same error at the same element."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, NamedTuple

import pytest

from flinkstate.state import (
    KeyedProcessFunction,
    ListStateDescriptor,
    RuntimeContext,
    StateTtlConfig,
    TimeDomain,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.errors import FlinkStateError, ProcessFunctionError
from flinkstate.state.heap.backend import HeapKeyedStateBackend
from flinkstate.state.process import KeyedProcessOperator
from flinkstate.state.process.harness import take_snapshot
from flinkstate.state.ttl.time import ManualTimeProvider


class Point(NamedTuple):
    x: int
    label: str


class Busy(KeyedProcessFunction):
    """Touches every part of the per-element path: states (one with TTL and incremental
    cleanup), both timer kinds (register and delete), the context, output, failures."""

    def open(self, runtime_context: RuntimeContext) -> None:
        ttl = StateTtlConfig.new_builder(timedelta(milliseconds=40)).cleanup_incrementally(3, True).build()
        recent = ValueStateDescriptor("recent", Types.PICKLED_BYTE_ARRAY())
        recent.enable_time_to_live(ttl)
        self.recent = runtime_context.get_state(recent)
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        if value[1] == "boom":
            raise ValueError("boom")
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        self.seen.add(repr(value[1]))
        previous = self.recent.value()
        self.recent.update(value[1])
        timers = ctx.timer_service()
        ts = ctx.timestamp()
        now = timers.current_processing_time()
        if ts is not None:
            timers.register_event_time_timer(ts + 10 * (n % 3))
            if n % 4 == 0:
                timers.delete_event_time_timer(ts)
        timers.register_processing_time_timer(now + n % 5)
        if n % 7 == 0:
            timers.delete_processing_time_timer(now + n % 5)
        if n % 2:
            yield ctx.get_current_key(), n, ts, timers.current_watermark(), previous

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        yield "timer", ctx.get_current_key(), timestamp, ctx.time_domain().name, self.count.value()
        if ctx.time_domain() is TimeDomain.EVENT_TIME and timestamp % 3 == 0:
            ctx.timer_service().register_event_time_timer(timestamp + 5)


def _operator(delay: int | None) -> KeyedProcessOperator:
    clock = ManualTimeProvider(1000)
    backend = HeapKeyedStateBackend(max_parallelism=16, time_provider=clock)
    op = KeyedProcessOperator(Busy(), backend, clock=clock, watermark_delay=delay)
    op.open()
    return op


def model_process_element(op: KeyedProcessOperator, key: Any, value: Any, timestamp: int | None) -> None:
    """The per-element path as it was before the bulk path replaced it."""
    delay = op._watermark_delay
    if timestamp is not None and delay is not None:
        watermark = timestamp - delay - 1
        if watermark > op.backend.current_watermark:
            op.advance_watermark(watermark)
    op.backend.set_current_key(key)
    ctx = op._ctx
    ctx.ts = timestamp
    try:
        op._emit(op.function.process_element(value, ctx))
    except Exception as exc:
        raise op._fail("process_element", exc) from exc


def _elements(rnd: random.Random, n: int, event_time: bool) -> list[tuple[Any, Any, int | None]]:
    kind = rnd.choice(["int", "str", "tuple"])
    pool: list[Any] = {
        "int": [rnd.randrange(-(1 << 40), 1 << 40) for _ in range(7)],
        "str": ["", "a", "ç", "日本", "🙂x", "long " * 5],
        "tuple": [Point(i, s) for i, s in ((1, "a"), (2, "é"), (1, "b"), (-3, ""))],
    }[kind]
    out: list[tuple[Any, Any, int | None]] = []
    t = 0
    for _ in range(n):
        key = rnd.choice(pool)
        t += rnd.randrange(0, 9)
        ts = (t if rnd.random() > 0.1 else None) if event_time else None
        out.append((key, (key, rnd.choice(["x", "ü", "", None])), ts))
    return out


def _state(op: KeyedProcessOperator) -> Any:
    snap = take_snapshot(op)
    keyed = {
        name: {kg: (cols.keys, cols.namespaces) for kg, cols in groups.items()}
        for name, (_, groups) in snap.keyed.items()
    }
    return (
        keyed,
        snap.watermark,
        op.event_timers.timers(),
        op.processing_timers.timers(),
        op._ctx.ts,
        op.backend.get_current_key(),
    )


def _values(op: KeyedProcessOperator) -> dict[str, Any]:
    backend, function = op.backend, op.function
    assert isinstance(function, Busy)
    out = {}
    for key in sorted(backend.get_keys("count"), key=repr):
        backend.set_current_key(key)
        out[repr(key)] = (function.count.value(), [repr(s) for s in function.seen.get() or []])
    return out


Elements = list[tuple[Any, Any, int | None]]


def _run(elements: Elements, delay: int | None, bulk: bool, rnd: random.Random) -> Any:
    op = _operator(delay)
    clock = op.clock
    assert isinstance(clock, ManualTimeProvider)
    outputs: list[Any] = []
    i = 0
    error: str | None = None
    try:
        while i < len(elements):
            chunk = elements[i : i + rnd.randrange(1, 40)]
            i += len(chunk)
            keys = [k for k, _, _ in chunk]
            values = [v for _, v, _ in chunk]
            stamps = [t for _, _, t in chunk]
            if bulk:
                timed = any(s is not None for s in stamps)
                op.process_elements(keys, iter(values), stamps if timed else None)
            else:
                for key, value, ts in chunk:
                    model_process_element(op, key, value, ts)
            outputs.extend(op.drain())
            clock.now += rnd.randrange(0, 3)
            op.advance_processing_time()
            outputs.extend(op.drain())
        op.end_of_input()
    except FlinkStateError as exc:
        error = f"{type(exc).__name__}: {exc}"
    outputs.extend(op.drain())
    return outputs, _state(op), _values(op), error


@pytest.mark.parametrize("seed", range(12))
def test_bulk_path_equals_the_per_element_model(seed: int) -> None:
    rnd = random.Random(seed)
    event_time = seed % 3 != 0
    delay = None if seed % 4 == 1 else rnd.randrange(0, 20)
    elements = _elements(rnd, 400, event_time)
    chunks = rnd.randrange(1 << 30)
    bulk = _run(elements, delay, True, random.Random(chunks))
    model = _run(elements, delay, False, random.Random(chunks))
    assert bulk == model
    assert bulk[3] is None
    assert bulk[0]  # the test sees output, timers and state
    assert bulk[1][2] or bulk[1][3] or not event_time


@pytest.mark.parametrize("bad", ["boom", None, 3.5])
def test_bulk_path_fails_as_the_model_does(bad: Any) -> None:
    """A failing function, a null key, a key of the wrong type: same error, same output
    and state up to the failing element."""
    rnd = random.Random(7)
    elements = _elements(random.Random(1), 60, True)
    elements = [(k if isinstance(k, str) else str(k), v, t) for k, v, t in elements]
    at = 37
    key, value, ts = elements[at]
    elements[at] = (key, (key, "boom"), ts) if bad == "boom" else (bad, value, ts)
    chunks = rnd.randrange(1 << 30)
    bulk = _run(elements, 0, True, random.Random(chunks))
    model = _run(elements, 0, False, random.Random(chunks))
    assert bulk == model
    assert bulk[3] is not None
    if bad == "boom":
        assert bulk[3].startswith(ProcessFunctionError.__name__)
        assert "ValueError: boom" in bulk[3]


def test_lengths_must_match() -> None:
    op = _operator(0)
    with pytest.raises(ValueError):
        op.process_elements(["a", "b"], iter([("a", "x")]), None)
