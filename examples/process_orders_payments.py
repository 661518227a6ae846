"""Two keyed inputs on Spark: orders and payments joined by order id with a
``KeyedCoProcessFunction``. An order waits for payments to cover it; an event-time timer
reports it unpaid when they have not within ``TIMEOUT`` ms of the order.

Usage: python examples/process_orders_payments.py [CHECKPOINT_DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from flinkstate.connector import coprocess
from flinkstate.state import KeyedCoProcessFunction, RuntimeContext, Types, ValueStateDescriptor

from spark_setup import spark_session

TIMEOUT = 30 * 60_000
OUTPUT = "order_id string, status string, due bigint, paid bigint"


class PaymentCheck(KeyedCoProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.due = runtime_context.get_state(ValueStateDescriptor("due", Types.LONG()))
        self.paid = runtime_context.get_state(ValueStateDescriptor("paid", Types.LONG()))

    def process_element1(self, order: Any, ctx: KeyedCoProcessFunction.Context) -> Iterator[Any]:
        self.due.update(order.total)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + TIMEOUT)
        yield from self._check(ctx)

    def process_element2(self, payment: Any, ctx: KeyedCoProcessFunction.Context) -> Iterator[Any]:
        self.paid.update((self.paid.value() or 0) + payment.amount)
        yield from self._check(ctx)

    def _check(self, ctx: KeyedCoProcessFunction.Context) -> Iterator[Any]:
        due, paid = self.due.value(), self.paid.value() or 0
        if due is not None and paid >= due:
            yield ctx.get_current_key(), "paid", due, paid
            self.due.clear()  # the timer finds nothing due and reports nothing

    def on_timer(self, timestamp: int, ctx: KeyedCoProcessFunction.OnTimerContext) -> Iterator[Any]:
        due = self.due.value()
        if due is not None:
            yield ctx.get_current_key(), "unpaid", due, self.paid.value() or 0
            self.due.clear()


def main(root: str = "/tmp/flinkstate-examples/orders", spark: Any = None) -> dict[str, Any]:
    """Runs the example under ``root`` on ``spark`` (default: a local session, stopped at the
    end): two runs, the second bringing late payments and the timeouts; returns each run's output."""
    own = spark is None
    spark = spark or spark_session()
    minute = 60_000
    runs = [
        (
            [("o1", 30, 0), ("o2", 50, minute), ("o3", 20, 2 * minute)],
            [("o1", 30, minute), ("o2", 20, 5 * minute), ("o3", 5, 3 * minute)],
        ),
        ([("o4", 10, 40 * minute)], [("o2", 30, 10 * minute), ("o4", 10, 41 * minute)]),
    ]
    result: dict[str, Any] = {}
    for i, (orders, payments) in enumerate(runs, 1):
        o = spark.createDataFrame(orders, "order_id string, total bigint, ts bigint")
        p = spark.createDataFrame(payments, "order_id string, amount bigint, ts bigint")
        out = coprocess(
            o, p, "order_id", "order_id", PaymentCheck(), OUTPUT, root, "payments", event_time="ts"
        )
        out.show()
        result[f"run {i}"] = sorted(map(tuple, out.collect()))
    if own:
        spark.stop()
    return result


if __name__ == "__main__":
    main(*sys.argv[1:2])
