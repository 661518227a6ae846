"""What every benchmark shares: result lines, medians, timers."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from flinkstate.state import HeapKeyedStateBackend, Types, ValueStateDescriptor


@dataclass(frozen=True)
class Result:
    """One JSON line. ``ratio`` is ours over the anchor's, oriented so higher is better."""

    id: str
    metric: str
    value: float
    unit: str
    anchor: str
    anchor_value: float
    ratio: float
    goal: str
    met: bool | None  # None: a reference figure with no goal of its own

    def emit(self) -> None:
        data = asdict(self)
        for key in ("value", "anchor_value", "ratio"):
            data[key] = round(data[key], 4)
        print(json.dumps(data), flush=True)


def paired(rounds: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(median ours, median anchor, median of ours/anchor) over rounds measured in pairs:
    load on the shared machine hits both members of a pair alike."""
    return (
        statistics.median(o for o, _ in rounds),
        statistics.median(a for _, a in rounds),
        statistics.median(o / a for o, a in rounds),
    )


def median_of(runs: int, fn: Callable[[], float]) -> float:
    """The median of ``runs`` calls of ``fn`` (the machine is shared and noisy)."""
    return statistics.median(fn() for _ in range(runs))


def timed(fn: Callable[[], Any]) -> float:
    """Seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def filled(n: int, desc: ValueStateDescriptor, async_snapshots: bool = True) -> HeapKeyedStateBackend:
    """A heap backend (LONG keys) whose ValueState ``desc`` holds ``k`` for every key ``k < n``."""
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), async_snapshots=async_snapshots)
    state = backend.get_state(desc)
    for k in range(n):
        backend.set_current_key(k)
        state.update(k)
    return backend


def spark_session() -> Any:
    """The benchmarks' SparkSession (local[2]) with the flinkstate source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from flinkstate.connector import register

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
