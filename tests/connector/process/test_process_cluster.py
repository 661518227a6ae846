"""The runner on two executors (``local-cluster``: separate JVMs and Python workers, task
retries on): a task attempt that fails after processing part of its range is retried, and
no element counts twice. Each run records where its subtasks ran (placement), unless the
session turns placement off. Runs in a subprocess (one SparkContext per process)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.spark import LOCAL_CLUSTER, run_driver

SCRIPT = """
from pyspark import cloudpickle
import process_functions
from process_functions import FailFirstAttempt, WordCount, word_count_model
from flinkstate.connector import process
cloudpickle.register_pickle_by_value(process_functions)
chk, marker = sys.argv[1] + "/chk", sys.argv[1] + "/marker"
assert spark.range(0, 8, 1, 8).rdd.map(lambda _: os.getpid()).distinct().count() == 2
words = [f"w{i % 11}" for i in range(3000)]
df = spark.createDataFrame([(w,) for w in words], "word string").repartition(4)

def finals(out):
    seen = {}
    for r in out.collect():
        seen.setdefault(r.word, []).append(r["count"])
    for counts in seen.values():
        assert sorted(counts) == list(range(min(counts), max(counts) + 1))
    return {w: max(c) for w, c in seen.items()}

shared = {"shared_filesystem": True}  # one host: the local root is shared
first = finals(process(df, "word", WordCount(), "word string, count bigint", chk, "wc", parallelism=3,
                       **shared))
assert first == word_count_model(words), first
second = finals(process(df, "word", FailFirstAttempt(marker), "word string, count bigint", chk, "wc",
                        **shared))
assert os.path.exists(marker), "the failure was not injected"
assert second == word_count_model(words * 2), second
third = finals(process(df, "word", WordCount(), "word string, count bigint", chk, "wc", parallelism=2,
                       **shared))
assert third == word_count_model(words * 3), third
spark.conf.set("spark.flinkstate.placement", "false")
fourth = finals(process(df, "word", WordCount(), "word string, count bigint", chk, "wc", **shared))
assert fourth == word_count_model(words * 4), fourth
print("PROCESS-CLUSTER-OK")
"""

CONF = {"spark.ui.enabled": "false", "spark.executor.memory": "768m", "spark.task.maxFailures": "2"}
"""Two executors, and a task that fails once is retried once."""


@pytest.mark.slow
def test_retried_attempt_on_two_executors_counts_once(tmp_path: Path) -> None:
    done = run_driver(SCRIPT, str(tmp_path), master=LOCAL_CLUSTER, conf=CONF, log_level="OFF",
                      directory=tmp_path / "driver")  # fmt: skip
    assert "PROCESS-CLUSTER-OK" in done.stdout, done.stderr[-6000:]
    from flinkstate.checkpoint import CheckpointStorage
    from flinkstate.connector.process.placement import LOCATIONS

    storage = CheckpointStorage(str(tmp_path / "chk"))
    assert storage.completed_ids() == [2, 3, 4]  # three retained
    placed = storage.load(3).manifest.properties[LOCATIONS].split()
    assert placed[0].startswith("app-") and len(placed) == 3, placed
    assert all(loc.startswith("executor_") for loc in placed[1:]), placed
    assert LOCATIONS not in storage.load(4).manifest.properties
