"""The driver side of P17 (see :mod:`cluster_bench`): runs ``process`` (or a ``foreach_batch``
streaming query) on the standalone cluster and prints one ``P17RUN <json>`` line per run:
its wall time and, from the committed checkpoint, how each subtask started, what it
downloaded, where it ran, and the sizes and writers of the subtask's files."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flinkstate.connector import foreach_batch, process
from flinkstate.state import KeyedProcessFunction, Types, ValueStateDescriptor

from cluster.live_runs import describe

UID = "count"
SCHEMA = "k bigint, n bigint"
PAUSE_S = 65
"""Longer than Spark's idle timeout of a Python worker (a hard-coded minute)."""


class RunningCount(KeyedProcessFunction):
    """A keyed running count: one value state, one output row per element."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("n", Types.LONG()))

    def process_element(self, value: Any, ctx: Any) -> Iterator[tuple[int, int]]:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield value.k, n


def run_keys(keys: int, records: int, run: int) -> list[int]:
    """A run's input: ``records`` keys of the ``keys`` the state holds (1% new ones)."""
    rnd = random.Random(run)
    return [rnd.randrange(keys) if i % 100 else keys + run * records + i for i in range(records)]


def batch_runs(spark: Any, root: str, options: dict[str, Any], backend: str, keys: int, records: int,
               runs: int, pauses: set[int]) -> None:  # fmt: skip
    """The fill (run 0, every key once), then ``runs`` runs of ``records`` records."""
    opts = {"backend": backend, "parallelism": 2, "storage_options": options}
    fill = spark.range(0, keys, 1, 8).selectExpr("id as k")
    started = time.perf_counter()
    process(fill, "k", RunningCount(), SCHEMA, root, UID, **opts)
    print("P17FILL", json.dumps({"seconds": time.perf_counter() - started, **describe(root, options)}))
    for run in range(1, runs + 1):
        if run in pauses:
            time.sleep(PAUSE_S)
        df = spark.createDataFrame([(k,) for k in run_keys(keys, records, run)], "k bigint")
        started = time.perf_counter()
        process(df, "k", RunningCount(), SCHEMA, root, UID, **opts)
        seconds = time.perf_counter() - started
        print("P17RUN", json.dumps({"run": run, "seconds": seconds, **describe(root, options)}), flush=True)


def stream_runs(spark: Any, root: str, options: dict[str, Any], backend: str, keys: int, records: int,
                runs: int, pauses: set[int], work: str) -> None:  # fmt: skip
    """The same as a ``foreach_batch`` streaming query over a directory of Parquet files: one
    file per micro-batch; a run's time is from its file's arrival to its checkpoint."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    inbox = Path(work) / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    run_batch = foreach_batch("k", RunningCount(), SCHEMA, root, UID, backend=backend, parallelism=2,
                              storage_options=options)  # fmt: skip
    stream = spark.readStream.schema("k bigint").option("maxFilesPerTrigger", 1).parquet(str(inbox))
    query = (stream.writeStream.foreachBatch(run_batch).option("checkpointLocation", f"{work}/query")
             .trigger(processingTime="200 milliseconds").start())  # fmt: skip
    try:
        for run in range(0, runs + 1):
            if run in pauses:
                time.sleep(PAUSE_S)
            values = list(range(keys)) if run == 0 else run_keys(keys, records, run)
            started = time.perf_counter()
            temp = inbox / f".{run}.tmp"
            pq.write_table(pa.table({"k": pa.array(values, pa.int64())}), temp)
            temp.rename(inbox / f"{run:04d}.parquet")
            while True:
                if query.exception() is not None:
                    raise RuntimeError(str(query.exception()))
                try:
                    if describe(root, options)["checkpoint"] == run + 1:
                        break
                except Exception:  # no checkpoint yet
                    pass
                time.sleep(0.05)
            seconds = time.perf_counter() - started
            tag = "P17FILL" if run == 0 else "P17RUN"
            print(tag, json.dumps({"run": run, "seconds": seconds, **describe(root, options)}), flush=True)
    finally:
        query.stop()


def heap_restored(spark: Any, root: str, options: dict[str, Any], keys: int) -> None:
    """The heap on a cluster whose Python workers are never reused: every run restores; the
    run after the fill changes 1% of the keys. Prints both checkpoints' own bytes."""
    opts = {"backend": "heap", "parallelism": 2, "storage_options": options}
    process(spark.range(0, keys, 1, 8).selectExpr("id as k"), "k", RunningCount(), SCHEMA, root, UID, **opts)
    full = describe(root, options)
    changed = random.Random(7).sample(range(keys), keys // 100)
    process(spark.createDataFrame([(k,) for k in changed], "k bigint"), "k", RunningCount(), SCHEMA, root,
            UID, **opts)  # fmt: skip
    after = describe(root, options)
    print("P17HEAP", json.dumps({"full": full, "after": after}), flush=True)
