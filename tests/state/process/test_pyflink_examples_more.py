"""Three more documented examples that use state, run on our harness (with
``test_pyflink_examples.py`` and ``test_pyflink_scenarios.py``: a dozen in all).

Each function does what the example does, written in our own code with PyFlink's API, and
each test expects what a plain-Python model of the example gives:

- the PyFlink playground's batch MapState example (``10-data_stream_batch_map_state``):
  a per-key map that adds up values until an entry passes 10, then holds it;
- its state-access example (``11-data_stream_state_access``): a keyed map function whose
  ValueState counter lets the first two elements of a key through incremented;
- Flink's "Fraud Detection with the DataStream API" walkthrough: a small transaction (under
  1.00) followed by a large one (over 500.00) on the same account within one minute of
  processing time raises an alert; a timer clears the flag after the minute.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flinkstate.state import (
    KeyedProcessFunction,
    KeyedProcessFunctionHarness,
    MapStateDescriptor,
    RuntimeContext,
    Types,
    ValueStateDescriptor,
)


class CappedSums(KeyedProcessFunction):
    """Adds each (field, amount) into the key's map entry for ``field`` while that entry is at
    most 10; emits the entry after the element."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.sums = runtime_context.get_map_state(MapStateDescriptor("map", Types.LONG(), Types.LONG()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        field, amount = value
        if not self.sums.contains(field):
            self.sums.put(field, amount)
        elif self.sums.get(field) <= 10:
            self.sums.put(field, self.sums.get(field) + amount)
        yield self.sums.get(field)


def test_batch_map_state_example(make_backend: Any) -> None:
    elements = [(n % 4, 1) for n in range(1, 101)]
    sums: dict[int, int] = {}
    expected = []
    for field, amount in elements:  # the model: the same rule over a plain dict
        sums[field] = (
            amount if field not in sums else sums[field] + amount if sums[field] <= 10 else sums[field]
        )
        expected.append(sums[field])
    with KeyedProcessFunctionHarness(CappedSums(), lambda v: v[0], backend_factory=make_backend) as h:
        for value in elements:
            h.process_element(value)
        out = h.get_output()
    assert out == expected
    assert max(out) == 11 and out.count(11) == 100 - 4 * 10  # each key stops at 11


class FirstTwoIncremented(KeyedProcessFunction):
    """The example's keyed map function: (key, n) becomes (key, n + 1) for a key's first two
    elements, then passes unchanged; a ValueState counts them."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("cnt", Types.LONG()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        count = self.count.value()
        if count is None or count < 2:
            self.count.update(1 if count is None else count + 1)
            yield value[0], value[1] + 1
        else:
            yield value[0], value[1]


def test_state_access_batch_example(make_backend: Any) -> None:
    elements = [(n % 4, n) for n in range(1, 11)]
    seen: dict[int, int] = {}
    expected = []
    for key, n in elements:
        seen[key] = seen.get(key, 0) + 1
        expected.append((key, n + 1 if seen[key] <= 2 else n))
    with KeyedProcessFunctionHarness(
        FirstTwoIncremented(), lambda v: v[0], backend_factory=make_backend
    ) as h:
        for value in elements:
            h.process_element(value)
        assert h.get_output() == expected


SMALL, LARGE, MINUTE = 1.00, 500.00, 60_000


class FraudDetector(KeyedProcessFunction):
    """The walkthrough's detector, keyed by account: (account, amount) in, account alerts out."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.flag = runtime_context.get_state(ValueStateDescriptor("flag", Types.BOOLEAN()))
        self.timer = runtime_context.get_state(ValueStateDescriptor("timer-state", Types.LONG()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        if self.flag.value() is not None:
            if value[1] > LARGE:
                yield "alert", value[0]
            self._clean_up(ctx)
        if value[1] < SMALL:
            self.flag.update(True)
            timer = ctx.timer_service().current_processing_time() + MINUTE
            ctx.timer_service().register_processing_time_timer(timer)
            self.timer.update(timer)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> None:
        self.timer.clear()
        self.flag.clear()

    def _clean_up(self, ctx: KeyedProcessFunction.Context) -> None:
        ctx.timer_service().delete_processing_time_timer(self.timer.value())
        self.timer.clear()
        self.flag.clear()


TRANSACTIONS = [  # (processing time, account, amount)
    (0, 1, 0.50), (10_000, 1, 600.00),  # small then large within the minute: alert
    (0, 2, 0.10), (61_000, 2, 900.00),  # the flag expired: no alert
    (5_000, 3, 0.99), (6_000, 3, 20.00), (7_000, 3, 700.00),  # a medium one clears the flag
    (20_000, 4, 0.20), (30_000, 4, 0.30), (85_000, 4, 501.00),  # the second small one re-arms
    (90_000, 5, 1.00), (91_000, 5, 800.00),  # exactly 1.00 is not small
]  # fmt: skip


def test_fraud_detection_walkthrough(make_backend: Any) -> None:
    flags: dict[int, int] = {}  # the model: account -> when its flag expires
    expected = []
    for now, account, amount in sorted(TRANSACTIONS):
        flags = {a: t for a, t in flags.items() if t > now}  # timers at or before now have fired
        if account in flags:
            if amount > LARGE:
                expected.append(("alert", account))
            del flags[account]
        if amount < SMALL:
            flags[account] = now + MINUTE
    with KeyedProcessFunctionHarness(FraudDetector(), lambda v: v[0], backend_factory=make_backend) as h:
        for now, account, amount in sorted(TRANSACTIONS):
            h.set_processing_time(now)
            h.process_element((account, amount))
        out = h.get_output()
    assert out == expected
    assert sorted(out) == [("alert", 1), ("alert", 4)]
