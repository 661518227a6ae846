"""Side outputs: one keyed function, three results. Temperature readings per sensor go
to the main output; a reading that arrives after the watermark passed its time goes to
the side output ``late``, and a jump of more than ten degrees from a sensor's previous
reading to the side output ``jumps`` (``yield tag, value``, as in PyFlink).

First in the test harness (no Spark), then on Spark: two runs of ``process``, where the
second run brings a reading older than the watermark the first one left. Each side
output is read back as its own DataFrame, committed in the same checkpoint as the output.

Usage: python examples/process_side_outputs.py [CHECKPOINT_DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

from flinkstate.connector import process, read_side_output
from flinkstate.state import (
    KeyedProcessFunction,
    KeyedProcessFunctionHarness,
    OutputTag,
    RuntimeContext,
    Types,
    ValueStateDescriptor,
)

from spark_setup import spark_session

LATE = OutputTag(
    "late", Types.ROW_NAMED(["sensor", "ts", "celsius"], [Types.STRING(), Types.LONG(), Types.DOUBLE()])
)
JUMPS = OutputTag("jumps", Types.STRING())
DELAY = 500  # ms of out-of-orderness the watermark allows


class Reading(NamedTuple):
    sensor: str
    ts: int
    celsius: float


RUNS = [
    [Reading("s1", 1000, 20.0), Reading("s2", 1500, 5.0), Reading("s1", 2000, 21.0),
     Reading("s2", 2500, 4.0), Reading("s1", 3000, 35.5)],
    [Reading("s2", 2000, 6.0), Reading("s1", 4000, 36.0), Reading("s2", 5000, 30.0)],
]  # fmt: skip


class SensorReadings(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.last = runtime_context.get_state(ValueStateDescriptor("last", Types.DOUBLE()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        if value.ts <= ctx.timer_service().current_watermark():
            yield LATE, (value.sensor, value.ts, value.celsius)
            return
        before = self.last.value()
        self.last.update(value.celsius)
        if before is not None and abs(value.celsius - before) > 10:
            yield JUMPS, f"{value.sensor}: {before} -> {value.celsius}"
        yield value.sensor, value.ts, value.celsius


def in_harness() -> dict[str, list[Any]]:
    """Both runs in the harness: elements in event-time order, as the Spark runner feeds
    them, and the watermark a run leaves (its largest time minus the delay, minus one)."""
    with KeyedProcessFunctionHarness(SensorReadings(), lambda r: r.sensor, watermark_delay=DELAY) as h:
        for run in RUNS:
            for reading in sorted(run, key=lambda r: r.ts):
                h.process_element(reading, reading.ts)
            h.process_watermark(max(r.ts for r in run) - DELAY - 1)
        return {"output": h.get_output(), "late": h.get_side_output(LATE), "jumps": h.get_side_output(JUMPS)}


def on_spark(root: str, spark: Any) -> dict[str, list[Any]]:
    """Both runs with ``process``; returns what the second run committed."""
    for run in RUNS:
        df = spark.createDataFrame(run, "sensor string, ts bigint, celsius double")
        out = process(
            df,
            "sensor",
            SensorReadings(),
            "sensor string, ts bigint, celsius double",
            root,
            "readings",
            event_time="ts",
            watermark_delay=DELAY,
            parallelism=2,
            side_outputs=[LATE, JUMPS],
        )
        out.orderBy("ts").show()
    late = read_side_output(spark, root, "readings", LATE)
    jumps = read_side_output(spark, root, "readings", JUMPS)
    late.show()
    jumps.show(truncate=False)
    return {
        "output": [tuple(r) for r in out.collect()],
        "late": [tuple(r) for r in late.collect()],
        "jumps": [r.value for r in jumps.collect()],
    }


def main(root: str = "/tmp/flinkstate-examples/side-outputs", spark: Any = None) -> dict[str, Any]:
    """Runs the example under ``root`` on ``spark`` (default: a local session, stopped at the
    end); returns what the harness collected and what Spark committed."""
    harness = in_harness()
    print("harness:", harness)
    own = spark is None
    spark = spark or spark_session()
    result = on_spark(root, spark)
    if own:
        spark.stop()
    return {"harness": harness, "spark": result}


if __name__ == "__main__":
    main(*sys.argv[1:2])
