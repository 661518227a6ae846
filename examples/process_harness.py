"""Unit-testing a keyed process function without Spark: the harness feeds elements, moves
the watermark and the processing clock, and snapshots; a snapshot restores at another
parallelism (a rescale), as the Spark runner does with checkpoints.

The function flags a payment larger than the user's previous one within a minute (event
time) and reminds the user of an open payment after an hour (processing time).

Usage: python examples/process_harness.py
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from flinkstate.state import (
    KeyedProcessFunction,
    KeyedProcessFunctionHarness,
    RuntimeContext,
    TimeDomain,
    Types,
    ValueStateDescriptor,
)

MINUTE, HOUR = 60_000, 3_600_000


class Payment(NamedTuple):
    user: str
    amount: int


class Watch(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.last = runtime_context.get_state(ValueStateDescriptor("last", Types.LONG()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        last, ts = self.last.value(), ctx.timestamp()
        assert ts is not None
        if last is not None and value.amount > last:
            yield "larger", value.user, value.amount
        if last is None:  # one reminder per open payment
            now = ctx.timer_service().current_processing_time()
            ctx.timer_service().register_processing_time_timer(now + HOUR)
        self.last.update(value.amount)
        ctx.timer_service().register_event_time_timer(ts + MINUTE)  # the minute ends

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        if ctx.time_domain() is TimeDomain.EVENT_TIME:
            self.last.clear()
        elif self.last.value() is not None:
            yield "reminder", ctx.get_current_key(), timestamp


def main() -> dict[str, list[Any]]:
    """Runs the example; returns the output of each step."""
    steps: dict[str, list[Any]] = {}
    h = KeyedProcessFunctionHarness(Watch(), lambda p: p.user, processing_time=0)
    h.process_element(Payment("ann", 10), timestamp=1_000)
    h.process_element(Payment("ann", 25), timestamp=2_000)  # larger within the minute
    h.process_element(Payment("bob", 5), timestamp=3_000)
    steps["elements"] = h.extract_output()
    h.process_watermark(2_000 + MINUTE)  # ann's minute ends: her last amount is forgotten
    h.process_element(Payment("ann", 30), timestamp=70_000)  # not "larger": a new minute
    steps["after the watermark"] = h.extract_output()
    snapshot = h.snapshot()
    h.close()

    # a rescale to 2 subtasks: each restores the keys (state and timers) it owns
    for subtask in range(2):
        with KeyedProcessFunctionHarness(
            Watch(), lambda p: p.user, parallelism=2, subtask=subtask, restore_from=snapshot
        ) as restored:
            restored.set_processing_time(HOUR)  # the reminders of open payments are due
            steps[f"subtask {subtask} at one hour"] = restored.extract_output()
    for name, out in steps.items():
        print(f"{name}: {out}")
    return steps


if __name__ == "__main__":
    main()
