"""Flink's broadcast state pattern on Spark: alert thresholds per word arrive as broadcast
elements (every key-group range gets them); keyed elements read them.

Usage: python examples/process_broadcast_rules.py [CHECKPOINT_DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from flinkstate.connector import process
from flinkstate.state import (
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    RuntimeContext,
    Types,
    ValueStateDescriptor,
)

from spark_setup import spark_session

RULES = MapStateDescriptor("rules", Types.STRING(), Types.LONG())


class Alerts(KeyedBroadcastProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext
    ) -> Iterator[Any]:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if n == ctx.get_broadcast_state(RULES).get(ctx.get_current_key()):
            yield ctx.get_current_key(), n

    def process_broadcast_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.Context
    ) -> Iterator[Any]:
        ctx.get_broadcast_state(RULES).put(value.word, value.threshold)
        yield from ()


def main(root: str = "/tmp/flinkstate-examples/rules", spark: Any = None) -> dict[str, Any]:
    """Runs the example under ``root`` on ``spark`` (default: a local session, stopped at the
    end); returns the alerts and the rules the checkpoint holds."""
    own = spark is None
    spark = spark or spark_session()
    text = "a b a c a b c c c a"
    words = spark.createDataFrame([(w,) for w in text.split()], "word string")
    rules = spark.createDataFrame([("a", 3), ("c", 2)], "word string, threshold bigint")
    alerts = process(words, "word", Alerts(), "word string, count bigint", root, "alerts", broadcast=rules)
    alerts.show()
    state = spark.read.format("flinkstate").option("operator", "alerts").option("state", "rules")
    state.load(root).show()
    result = {
        "alerts": sorted(map(tuple, alerts.collect())),
        "rules": sorted(map(tuple, state.load(root).collect())),
    }
    if own:
        spark.stop()
    return result


if __name__ == "__main__":
    main(*sys.argv[1:2])
