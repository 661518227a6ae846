"""Sessionization with event-time timers and event-time TTL on Spark: clicks of users
become sessions (a gap of 30 minutes closes one); two runs over two days of data, the
second one the end of the input.

Usage: python examples/process_sessions.py [CHECKPOINT_DIR]
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from flinkstate.connector import process
from flinkstate.state import (
    KeyedProcessFunction,
    RuntimeContext,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
)

from spark_setup import spark_session

GAP = 30 * 60 * 1000
SCHEMA = "user string, start bigint, end bigint, clicks bigint"


class Sessions(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        desc = ValueStateDescriptor("session", Types.TUPLE([Types.LONG(), Types.LONG(), Types.LONG()]))
        desc.enable_time_to_live(StateTtlConfig.new_builder(timedelta(days=1)).use_event_time().build())
        self.session = runtime_context.get_state(desc)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        ts = ctx.timestamp()
        assert ts is not None
        timers = ctx.timer_service()
        current = self.session.value()
        if current is not None:
            timers.delete_event_time_timer(current[1] + GAP)
        if current is not None and ts <= current[1] + GAP:
            current = (current[0], max(current[1], ts), current[2] + 1)
        else:
            if current is not None:
                yield (ctx.get_current_key(), *current)
            current = (ts, ts, 1)
        self.session.update(current)
        timers.register_event_time_timer(current[1] + GAP)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        current = self.session.value()
        if current is not None:
            yield (ctx.get_current_key(), *current)
            self.session.clear()


def main(root: str = "/tmp/flinkstate-examples/sessions", spark: Any = None) -> dict[str, Any]:
    """Runs the example under ``root`` on ``spark`` (default: a local session, stopped at the
    end); returns the clicks and the sessions emitted."""
    own = spark is None
    spark = spark or spark_session()
    rnd = random.Random(1)
    day = 24 * 3600 * 1000
    every: list[tuple[str, int]] = []
    sessions: list[tuple[Any, ...]] = []
    for i in range(2):
        clicks = [(rnd.choice(["ann", "bob", "eve"]), i * day + rnd.randrange(day)) for _ in range(200)]
        every += clicks
        df = spark.createDataFrame(clicks, "user string, ts bigint")
        out = process(
            df,
            "user",
            Sessions(),
            SCHEMA,
            root,
            "sessions",
            event_time="ts",
            watermark_delay=60_000,
            end_of_input=i == 1,
        )
        out.orderBy("user", "start").show(5)
        sessions += [tuple(r) for r in out.collect()]
        if i == 0:  # the sessions still open: their timers, read from the checkpoint
            timers = spark.read.format("flinkstate").option("operator", "sessions").option("timers", "true")
            timers.load(root).show()
    if own:
        spark.stop()
    return {"clicks": every, "sessions": sessions}


if __name__ == "__main__":
    main(*sys.argv[1:2])
