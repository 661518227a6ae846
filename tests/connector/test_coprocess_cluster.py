"""``coprocess`` on two executors (``local-cluster``: separate JVMs and Python workers, task
retries on): a task attempt that fails after processing part of its range of both inputs is
retried, and no element of either input counts twice. Runs in a subprocess (one
SparkContext per process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, sys.argv[2])
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession
    import coprocess_functions
    from coprocess_functions import OUT_SCHEMA, FailFirstAttemptPayments, OrderPayments, stored_seen
    from flinkstate.connector import coprocess
    cloudpickle.register_pickle_by_value(coprocess_functions)
    chk, marker = sys.argv[1] + "/chk", sys.argv[1] + "/marker"
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false")
             .config("spark.executor.memory", "768m").config("spark.task.maxFailures", "2").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    assert spark.range(0, 8, 1, 8).rdd.map(lambda _: os.getpid()).distinct().count() == 2
    orders = [(f"k{i % 7}", 1_000_000) for i in range(700)]  # never paid: every element is counted
    payments = [(f"k{i % 5}", 1) for i in range(1500)]
    o = spark.createDataFrame(orders, "id string, amount bigint").repartition(3)
    p = spark.createDataFrame(payments, "id string, paid bigint").repartition(4)
    model = {}
    for key, _ in orders + payments:
        model[key] = model.get(key, 0) + 1
    for run, function, parallelism in [(1, OrderPayments(), 3), (2, FailFirstAttemptPayments(marker), None),
                                       (3, OrderPayments(), 2)]:
        out = coprocess(o, p, "id", "id", function, OUT_SCHEMA, chk, "op", parallelism=parallelism,
                        shared_filesystem=True)  # one host: the local root is shared
        assert out.count() == 0
        assert stored_seen(chk, "op") == {k: run * n for k, n in model.items()}, run
    assert os.path.exists(marker), "the failure was not injected"
    print("COPROCESS-CLUSTER-OK")
    spark.stop()
    """
)


@pytest.mark.slow
def test_retried_attempt_on_two_executors_counts_each_input_once(tmp_path: Path) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    tests = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), tests],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "COPROCESS-CLUSTER-OK" in done.stdout, done.stderr[-6000:]
    from flinkstate.checkpoint import CheckpointStorage

    assert CheckpointStorage(str(tmp_path / "chk")).completed_ids() == [1, 2, 3]
