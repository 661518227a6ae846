"""PyFlink's examples and documented scenarios that use state, run on our harness.

(PyFlink's ``test_data_stream.py`` scenarios: ``test_pyflink_scenarios.py``.)

Each function here does what one of PyFlink 2.3's examples (``pyflink/examples/datastream``)
or Flink's documentation does, written in our own code with PyFlink's API (the developers'
guide: learn semantics from Flink's sources, never copy them), and each test expects the
result PyFlink documents or a plain-Python model of it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from flinkstate.state import (
    KeyedProcessFunction,
    KeyedProcessFunctionHarness,
    ReducingStateDescriptor,
    RuntimeContext,
    StateTtlConfig,
    Time,
    Types,
    ValueStateDescriptor,
)


def _ttl_running_sum(descriptor_name: str) -> ValueStateDescriptor:
    """A FLOAT running sum kept one second after its last read or write (the examples' TTL)."""
    desc = ValueStateDescriptor(descriptor_name, Types.FLOAT())
    ttl = StateTtlConfig.new_builder(Time.seconds(1))
    ttl = ttl.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite).disable_cleanup_in_background()
    desc.enable_time_to_live(ttl.build())
    return desc


class RunningSum(KeyedProcessFunction):
    """PyFlink's state_access.py example: each (name, score) emits the name's running sum."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.total = runtime_context.get_state(_ttl_running_sum("state"))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield value[0], total


class TimedSum(KeyedProcessFunction):
    """PyFlink's event_time_timer.py example: each (time, name, score) adds to the name's
    sum and sets an event-time timer two seconds later, which emits (name, sum)."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.total = runtime_context.get_state(_ttl_running_sum("state"))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> None:
        self.total.update((self.total.value() or 0) + value[2])
        stamp = ctx.timestamp()
        assert stamp is not None
        ctx.timer_service().register_event_time_timer(stamp + 2000)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        yield ctx.get_current_key(), self.total.value()


# the inputs of those examples
SCORES = [("Alice", 110.1), ("Bob", 30.2), ("Alice", 20.0), ("Bob", 53.1),
          ("Alice", 13.1), ("Bob", 3.1), ("Bob", 16.1), ("Alice", 20.1)]  # fmt: skip
TIMED = [(1000, "Alice", 110.1), (4000, "Bob", 30.2), (3000, "Alice", 20.0), (2000, "Bob", 53.1),
         (5000, "Alice", 13.1), (3000, "Bob", 3.1), (7000, "Bob", 16.1), (10000, "Alice", 20.1)]  # fmt: skip


def test_state_access_example(make_backend: Any) -> None:
    running: dict[str, float] = defaultdict(float)
    expected = []
    for name, score in SCORES:  # the running sum per name
        running[name] += score
        expected.append((name, running[name]))
    with KeyedProcessFunctionHarness(RunningSum(), lambda value: value[0], backend_factory=make_backend) as h:
        for value in SCORES:
            h.process_element(value)
        out = h.get_output()
    assert [k for k, _ in out] == [k for k, _ in expected]
    assert [v for _, v in out] == pytest.approx([v for _, v in expected], rel=1e-6)  # FLOAT: 32 bits


def test_event_time_timer_example(make_backend: Any) -> None:
    # Flink's rule with bounded out-of-orderness of 2 s: before each element the watermark is
    # the largest time seen minus 2000 minus 1; a timer fires once the watermark reaches it;
    # the bounded input ends with the largest watermark
    sums: dict[str, float] = defaultdict(float)
    timers: set[tuple[int, str]] = set()
    expected, seen = [], -(2**63)

    def advance(watermark: int) -> None:
        for time, name in sorted(t for t in timers if t[0] <= watermark):
            timers.discard((time, name))
            expected.append((name, sums[name]))

    for ts, name, score in TIMED:
        seen = max(seen, ts)
        advance(seen - 2000 - 1)
        sums[name] += score
        timers.add((ts + 2000, name))
    advance(2**63 - 1)
    with KeyedProcessFunctionHarness(
        TimedSum(), lambda value: value[1], watermark_delay=2000, backend_factory=make_backend
    ) as h:
        for value in TIMED:
            h.process_element(value, timestamp=value[0])
        h.end_input()
        out = h.get_output()
    assert sorted(k for k, _ in out) == sorted(k for k, _ in expected)
    assert [v for _, v in out] == pytest.approx([v for _, v in expected], rel=1e-6)


WORD_COUNT_DATA = [  # the first lines of the play word_count.py counts
    "To be, or not to be,--that is the question:--",
    "Whether 'tis nobler in the mind to suffer",
    "The slings and arrows of outrageous fortune",
    "Or to take arms against a sea of troubles,",
]


class KeyedReduce(KeyedProcessFunction):
    """What ``KeyedStream.reduce(f)`` runs: reducing state, each element's running result."""

    def __init__(self, reduce: Any) -> None:
        self.reduce = reduce

    def open(self, runtime_context: RuntimeContext) -> None:
        desc = ReducingStateDescriptor("reduce", self.reduce, Types.TUPLE([Types.STRING(), Types.INT()]))
        self.state = runtime_context.get_reducing_state(desc)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        self.state.add(value)
        yield self.state.get()


def test_word_count_example_reduce(make_backend: Any) -> None:
    def reduce(a: tuple[str, int], b: tuple[str, int]) -> tuple[str, int]:  # word_count.py's reduce
        return a[0], a[1] + b[1]

    words = [(w, 1) for line in WORD_COUNT_DATA for w in line.split()]
    counts: dict[str, int] = defaultdict(int)
    expected = []
    for w, _ in words:
        counts[w] += 1
        expected.append((w, counts[w]))
    with KeyedProcessFunctionHarness(KeyedReduce(reduce), lambda i: i[0], backend_factory=make_backend) as h:
        for word in words:
            h.process_element(word)
        assert h.get_output() == expected


class CountWindowAverage(KeyedProcessFunction):
    """The average of every two values of a key (Flink's state docs, "CountWindowAverage")."""

    def open(self, runtime_context: RuntimeContext) -> None:
        desc = ValueStateDescriptor("average", Types.TUPLE([Types.LONG(), Types.LONG()]))
        self.sum = runtime_context.get_state(desc)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        count, total = self.sum.value() or (0, 0)
        count, total = count + 1, total + value[1]
        self.sum.update((count, total))
        if count >= 2:
            self.sum.clear()
            yield value[0], total / count


def test_count_window_average_doc_example(make_backend: Any) -> None:
    with KeyedProcessFunctionHarness(CountWindowAverage(), lambda v: v[0], backend_factory=make_backend) as h:
        for value in [(1, 3), (1, 5), (1, 7), (1, 4), (1, 2)]:
            h.process_element(value)
        assert h.get_output() == [(1, 4.0), (1, 5.5)]  # the docs: "(1,4) and (1,5)" in Java's longs


class CountWithTimeout(KeyedProcessFunction):
    """A key's count, emitted once the key has had no element for a minute of event time
    (Flink's process function docs, "CountWithTimeoutFunction")."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.state = runtime_context.get_state(ValueStateDescriptor("my_state", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> None:
        key, count, _ = self.state.value() or (value[0], 0, 0)
        self.state.update((key, count + 1, ctx.timestamp()))
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 60000)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        key, count, last = self.state.value()
        if timestamp == last + 60000:
            yield key, count


def test_count_with_timeout_doc_example(make_backend: Any) -> None:
    events = [("a", 0), ("b", 10_000), ("a", 50_000), ("b", 80_000), ("a", 200_000), ("c", 200_000)]
    last: dict[str, int] = {}
    expected = []
    for key, ts in events:  # the docs' rule: emitted when a minute passes with no newer element
        for k, t in sorted(last.items(), key=lambda kv: kv[1]):
            if t + 60000 <= ts - 1:
                expected.append((k, sum(1 for e in events if e[0] == k and e[1] <= t)))
                del last[k]
        last[key] = ts
    expected += [(k, sum(1 for e in events if e[0] == k and e[1] <= t)) for k, t in sorted(last.items())]
    with KeyedProcessFunctionHarness(
        CountWithTimeout(), lambda v: v[0], watermark_delay=0, backend_factory=make_backend
    ) as h:
        for key, ts in events:
            h.process_element((key, ts), timestamp=ts)
        h.end_input()
        assert h.get_output() == expected
