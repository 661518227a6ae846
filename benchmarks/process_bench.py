"""P11: a keyed running count end to end (1M records, 10k keys, local[2]) with ``process``,
against Spark's own Python stateful APIs on the same data in the same run:
``applyInPandasWithState`` and ``transformWithStateInPandas`` (one micro-batch of a
file stream holding the records, each emitting every key's count once per batch).

Ours runs the same job two ways: ``P11`` emits every key's count once per run (the
anchors' output: a processing-time timer per key fires after the run's elements), and
``P11E`` emits a row for every element (a million output rows: more work than the
anchors do). A PyFlink ``KeyedProcessFunction`` with a ``ValueState`` is measured too
(``P11F``) when a virtualenv with ``apache-flink`` is at ``FLINK_VENV`` (optional; reported
as skipped otherwise): ``pyflink_count.py`` runs there.

``P11C`` is Spark's own pipeline for ours with no work (the ceiling of any runner), and
``P11B`` the bound for one batch: that ceiling plus P11's function alone, timed without
Spark in the same run and spread over the cores, for a runner that cost nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flinkstate.state import KeyedProcessFunction, RuntimeContext, Types, ValueStateDescriptor

from common import Result, paired, spark_session, timed

KEYS = 10_000


class RunningCount(KeyedProcessFunction):
    """Counts per key; emits each key's count once per run (``per_element=False``) or every time."""

    def __init__(self, per_element: bool) -> None:
        self.per_element = per_element

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if self.per_element:
            return ((ctx.get_current_key(), n),)
        ctx.timer_service().register_processing_time_timer(0)  # due at once: fires after the run
        return None

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Any:
        return ((ctx.get_current_key(), self.count.value()),)


def ours(spark: Any, data: str, per_element: bool) -> None:
    from flinkstate.connector import process

    checkpoint = tempfile.mkdtemp(prefix="p11-")
    try:
        df = spark.read.parquet(data)
        out = process(
            df,
            "key",
            RunningCount(per_element),
            "key bigint, count bigint",
            checkpoint,
            "p11",
            parallelism=PARALLELISM,
        )
        out.write.format("noop").mode("overwrite").save()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def _count_pandas(key: Any, pdfs: Any, state: Any) -> Any:
    import pandas as pd

    total = state.get[0] if state.exists else 0
    for pdf in pdfs:
        total += len(pdf)
    state.update((total,))
    yield pd.DataFrame({"key": [key[0]], "count": [total]})


def _stream(spark: Any, data: str, query: Any, conf: dict[str, str], per_trigger: int) -> None:
    checkpoint = tempfile.mkdtemp(prefix="p11-anchor-")
    previous = {k: spark.conf.get(k, None) for k in conf}
    try:
        for k, v in conf.items():
            spark.conf.set(k, v)
        stream = spark.readStream.schema("key bigint").option("maxFilesPerTrigger", per_trigger).parquet(data)
        handle = (
            query(stream)
            .writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        handle.awaitTermination()
    finally:
        for k, v in previous.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
        shutil.rmtree(checkpoint, ignore_errors=True)


def apply_in_pandas_with_state(spark: Any, data: str, per_trigger: int) -> None:
    from pyspark.sql.streaming.state import GroupStateTimeout

    def query(stream: Any) -> Any:
        return stream.groupBy("key").applyInPandasWithState(
            _count_pandas, "key long, count long", "count long", "Update", GroupStateTimeout.NoTimeout
        )

    _stream(spark, data, query, {}, per_trigger)


def transform_with_state(spark: Any, data: str, per_trigger: int) -> None:
    from tws_processor import CountProcessor

    def query(stream: Any) -> Any:
        return stream.groupBy("key").transformWithStateInPandas(
            statefulProcessor=CountProcessor(),
            outputStructType="key long, count long",
            outputMode="Update",
            timeMode="None",
        )

    provider = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    _stream(spark, data, query, {"spark.sql.streaming.stateStore.providerClass": provider}, per_trigger)


def ours_stream(spark: Any, data: str, per_trigger: int) -> None:
    """Ours as a stream: ``foreach_batch`` on the anchors' file stream, one run per micro-batch."""
    from flinkstate.connector import foreach_batch

    checkpoint = tempfile.mkdtemp(prefix="p11-ours-")
    spark_checkpoint = tempfile.mkdtemp(prefix="p11-spark-")
    try:
        fn = foreach_batch(
            "key",
            RunningCount(False),
            "key bigint, count bigint",
            checkpoint,
            "p11",
            parallelism=PARALLELISM,
            sink=lambda out, _: out.write.format("noop").mode("overwrite").save(),
        )
        stream = spark.readStream.schema("key bigint").option("maxFilesPerTrigger", per_trigger).parquet(data)
        handle = (
            stream.writeStream.foreachBatch(fn)
            .option("checkpointLocation", spark_checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        handle.awaitTermination()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
        shutil.rmtree(spark_checkpoint, ignore_errors=True)


def ceiling(spark: Any, data: str) -> None:
    """What Spark alone costs for ours: read, route, shuffle, sort, ship every row to a Python
    task and back (the task drops them): no runner can beat this pipeline's rate."""
    from pyspark.sql import functions as F  # noqa: N812

    df = spark.read.parquet(data).select("key", F.monotonically_increasing_id().alias("seq"))
    ranges = df.repartition(2, "key").sortWithinPartitions("seq")
    ranges.mapInArrow(lambda it: (b.slice(0, 0) for b in it), df.schema).write.format("noop").mode(
        "overwrite"
    ).save()


def _write_data(spark: Any, n: int, files: int) -> str:
    data = tempfile.mkdtemp(prefix="p11-data-")
    spark.range(0, n, 1, files).selectExpr(f"id % {KEYS} as key").write.mode("overwrite").parquet(data)
    return data


BATCHES = 10
PARALLELISM = 2


def function_cost(records: int = 500_000) -> float:
    """Seconds per record of P11's function alone, as a task runs it (the per-record loop
    over Arrow-sized batches on a heap backend) without Spark: median of 5."""
    from flinkstate.state import HeapKeyedStateBackend
    from flinkstate.state.process import KeyedProcessOperator

    keys = [i % KEYS for i in range(10_000)]
    values = [None] * len(keys)

    def once() -> float:
        operator = KeyedProcessOperator(RunningCount(False), HeapKeyedStateBackend(key_type=Types.LONG()))
        operator.open()
        start = time.perf_counter()
        for _ in range(records // len(keys)):
            operator.process_elements(keys, values, None)
        operator.advance_processing_time()
        operator.drain()
        return (time.perf_counter() - start) / records

    once()  # warm-up
    return statistics.median(once() for _ in range(5))


def bench_p11(quick: bool) -> Iterator[Result]:
    n = 200_000 if quick else 1_000_000
    runs = 1 if quick else 3
    spark = spark_session()
    from pyspark import cloudpickle

    import tws_processor

    for module in (sys.modules[__name__], tws_processor):  # not importable on the workers
        cloudpickle.register_pickle_by_value(module)
    data = _write_data(spark, n, BATCHES)
    try:
        jobs = {
            "ours": lambda: ours(spark, data, per_element=False),
            "ours_each": lambda: ours(spark, data, per_element=True),
            "apply": lambda: apply_in_pandas_with_state(spark, data, BATCHES),
            "tws": lambda: transform_with_state(spark, data, BATCHES),
            "ceiling": lambda: ceiling(spark, data),
            "ours_10": lambda: ours_stream(spark, data, 1),
            "apply_10": lambda: apply_in_pandas_with_state(spark, data, 1),
            "tws_10": lambda: transform_with_state(spark, data, 1),
        }
        rates: dict[str, list[float]] = {k: [] for k in jobs}
        for i in range(runs + 1):  # the first round warms the JVM and the workers
            for name, job in jobs.items():
                seconds = timed(job)
                if i:
                    rates[name].append(n / seconds)
        cases = (
            ("P11", "ours", "one batch, output once per key"),
            ("P11E", "ours_each", "one batch, output every element"),
            ("P11S", "ours_10", f"{BATCHES} micro-batches, output once per key per batch"),
        )
        for bench, key, what in cases:
            suffix = "_10" if key == "ours_10" else ""
            for anchor_key, anchor, goal, target in (
                ("apply", "applyInPandasWithState", ">= 5x", 5.0),
                ("tws", "transformWithStateInPandas", ">= 10x", 10.0),
            ):
                pairs = list(zip(rates[key], rates[anchor_key + suffix], strict=True))
                mine, theirs, ratio = paired(pairs)
                yield Result(
                    bench,
                    f"running count, {n} records / {KEYS} keys, {what}",
                    mine,
                    "records/s",
                    anchor,
                    theirs,
                    ratio,
                    goal,
                    ratio >= target,
                )
        mine, theirs, ratio = paired(list(zip(rates["ceiling"], rates["apply"], strict=True)))
        yield Result(
            "P11C",
            "Spark's ceiling for ours: read, route, shuffle, sort, to Python and back, no work",
            mine,
            "records/s",
            "applyInPandasWithState",
            theirs,
            ratio,
            "ceiling",
            None,
        )
        per_record = function_cost()
        bound = [n / (n / c + n * per_record / PARALLELISM) for c in rates["ceiling"]]
        mine, theirs, ratio = paired(list(zip(bound, rates["apply"], strict=True)))
        yield Result(
            "P11B",
            f"bound for one batch: Spark's ceiling plus P11's function alone ({per_record * 1e6:.2f} µs "
            f"per record without Spark) on {PARALLELISM} cores, for a runner that cost nothing",
            mine,
            "records/s",
            "applyInPandasWithState",
            theirs,
            ratio,
            "bound",
            None,
        )
        yield from pyflink(rates["ours"])
    finally:
        shutil.rmtree(data, ignore_errors=True)


FLINK_VENV = Path(os.environ.get("FLINK_VENV", "/work/flinkenv"))
PYFLINK_RECORDS = 100_000
"""PyFlink's keyed Python functions run at about a thousand records a second here: a
million would take a quarter of an hour, so its job gets a tenth of them (same keys)."""


def pyflink(ours: list[float]) -> Iterator[Result]:
    """PyFlink's KeyedProcessFunction with a ValueState (P11's job: a running count, each
    key's count emitted once), run in the virtualenv at ``FLINK_VENV`` when it has
    ``apache-flink``; against P11's ``process`` rates of this run (records/s)."""
    python = FLINK_VENV / "bin" / "python"
    if not python.exists():
        print(f'{{"id": "P11F", "skipped": "no apache-flink virtualenv at {FLINK_VENV}"}}', flush=True)
        return
    with tempfile.TemporaryDirectory(prefix="p11f-") as work:
        out = Path(work, "out.json")
        job = Path(__file__).with_name("pyflink_count.py")
        subprocess.run([str(python), str(job), str(PYFLINK_RECORDS), str(KEYS), str(out)],
                       check=True, capture_output=True, cwd=work)  # fmt: skip
        measured = json.loads(out.read_text())
    theirs = measured["records"] / measured["seconds"]
    mine = statistics.median(ours)
    yield Result("P11F", f"running count, {KEYS} keys, one batch, output once per key (ours: 1M records)",
                 mine, "records/s",
                 f"PyFlink KeyedProcessFunction + ValueState, {PYFLINK_RECORDS} records, 2 subtasks, "
                 f"from its first element to its last (whole job {measured['wall']:.0f} s)",
                 theirs, mine / theirs, "reference", None)  # fmt: skip


BENCHMARKS = {"P11": bench_p11}
