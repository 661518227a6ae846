"""Two-input process functions the harness and the Spark runner tests share, with models."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter
from typing import Any

from flinkstate.state import (
    KeyedCoProcessFunction,
    KeyedCoProcessFunctionHarness,
    RuntimeContext,
    Types,
    ValueStateDescriptor,
)

TIMEOUT = 100
OUT_SCHEMA = "key string, kind string, amount bigint, paid bigint, n bigint, at bigint"


class OrderPayments(KeyedCoProcessFunction):
    """Orders (input 1: ``amount``) matched with payments (input 2: ``paid``) of one key.

    Emits ``(key, "paid", amount, paid, n, at)`` once the payments cover the order, or
    ``(key, "unpaid", ...)`` when an event-time timer ``TIMEOUT`` ms after the order fires
    first; ``n`` counts the key's elements of both inputs (so the order they came in shows),
    ``at`` is ``ctx.timestamp()``. A null ``paid`` pays nothing.
    """

    def open(self, runtime_context: RuntimeContext) -> None:
        self.amount = runtime_context.get_state(ValueStateDescriptor("amount", Types.LONG()))
        self.paid = runtime_context.get_state(ValueStateDescriptor("paid", Types.LONG()))
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", Types.LONG()))
        self.timer = runtime_context.get_state(ValueStateDescriptor("timer", Types.LONG()))

    def _count(self) -> int:
        n = (self.seen.value() or 0) + 1
        self.seen.update(n)
        return n

    def process_element1(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Iterator[Any]:
        n = self._count()
        self.amount.update(value.amount)
        if ctx.timestamp() is not None and self.timer.value() is None:
            self.timer.update(ctx.timestamp() + TIMEOUT)
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + TIMEOUT)
        yield from self._settle(ctx, n)

    def process_element2(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Iterator[Any]:
        n = self._count()
        self.paid.update((self.paid.value() or 0) + (value.paid or 0))
        yield from self._settle(ctx, n)

    def _settle(self, ctx: KeyedCoProcessFunction.Context, n: int) -> Iterator[Any]:
        amount, paid = self.amount.value(), self.paid.value() or 0
        if amount is not None and paid >= amount:
            yield str(ctx.get_current_key()), "paid", amount, paid, n, ctx.timestamp()
            timer = self.timer.value()
            if timer is not None:
                ctx.timer_service().delete_event_time_timer(timer)
            for state in (self.amount, self.paid, self.timer):
                state.clear()

    def on_timer(self, timestamp: int, ctx: KeyedCoProcessFunction.OnTimerContext) -> Iterator[Any]:
        amount = self.amount.value()
        if amount is not None:
            key = str(ctx.get_current_key())
            yield key, "unpaid", amount, self.paid.value() or 0, self.seen.value(), ctx.timestamp()
        for state in (self.amount, self.paid, self.timer):
            state.clear()


def order_payments_model(events: Iterable[tuple[int, Any, int | None, int | None]]) -> list[tuple[Any, ...]]:
    """Plain Python: ``events`` are ``(input, key, amount or paid, timestamp)`` in the order
    the function sees them; no watermark moves until the end, where every timer fires."""
    amount: dict[Any, int] = {}
    paid: dict[Any, int] = {}
    seen: dict[Any, int] = {}
    timers: dict[Any, int] = {}
    out: list[tuple[Any, ...]] = []
    for side, key, number, ts in events:
        seen[key] = seen.get(key, 0) + 1
        if side == 1:
            amount[key] = number  # type: ignore[assignment]
            if ts is not None:
                timers.setdefault(key, ts + TIMEOUT)
        else:
            paid[key] = paid.get(key, 0) + (number or 0)
        if key in amount and amount[key] is not None and paid.get(key, 0) >= amount[key]:
            out.append((str(key), "paid", amount[key], paid[key], seen[key], ts))
            for table in (amount, paid, timers):
                table.pop(key, None)
    for key, at in timers.items():
        if amount.get(key) is not None:
            out.append((str(key), "unpaid", amount[key], paid.get(key, 0), seen[key], at))
    return out


def harness_run(
    runs: Iterable[list[tuple[int, Any, int | None]]],
    watermark_delay: int,
    end_of_input: bool,
    keys: tuple[Callable[[Any], Any], Callable[[Any], Any]] = (attrgetter("id"), attrgetter("id")),
) -> list[list[Any]]:
    """The output of each run of :class:`OrderPayments` in one harness: ``runs`` are the
    runs' elements ``(input, row, timestamp)`` in the order a subtask sees them (``keys``:
    the key selectors of input 1 and 2); after each
    run the watermark moves to the largest event time so far minus the delay minus one (as
    the Spark runner's does), and with ``end_of_input`` every timer fires."""
    outputs = []
    largest: int | None = None
    with KeyedCoProcessFunctionHarness(OrderPayments(), *keys, watermark_delay=watermark_delay) as h:
        for elements in runs:
            for side, row, ts in elements:
                (h.process_element1 if side == 1 else h.process_element2)(row, ts)
                largest = ts if largest is None or (ts is not None and ts > largest) else largest
            if largest is not None:
                h.process_watermark(largest - watermark_delay - 1)
            if end_of_input:
                h.end_input()
            outputs.append(h.extract_output())
    return outputs


class FailingOrders(OrderPayments):
    """:class:`OrderPayments` that raises on an order of key "boom"."""

    def process_element1(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Iterator[Any]:
        if ctx.get_current_key() == "boom":
            raise ValueError("boom is not an order")
        yield from super().process_element1(value, ctx)


class FailFirstAttemptPayments(OrderPayments):
    """:class:`OrderPayments` whose first task attempt fails at a payment of key "k3"
    (``marker`` records that it did), after processing part of its range."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def process_element2(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Iterator[Any]:
        import os

        if ctx.get_current_key() == "k3" and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write(str(os.getpid()))
            raise RuntimeError("injected failure of the first attempt")
        yield from super().process_element2(value, ctx)


def stored_seen(root: Any, uid: str) -> dict[Any, int]:
    """The ``seen`` state of operator ``uid`` in the latest checkpoint under ``root``."""
    from flinkstate.checkpoint import open_checkpoint

    checkpoint = open_checkpoint(str(root))
    p = checkpoint.operator(uid).parallelism
    out = {}
    for i in range(p):
        backend = checkpoint.keyed_backend(uid, i, p)
        state = backend.get_state(ValueStateDescriptor("seen", Types.LONG()))
        for key in list(backend.get_keys("seen")):
            backend.set_current_key(key)
            out[key] = state.value()
    return out
