"""``coprocess`` on two executors (``local-cluster``: separate JVMs and Python workers, task
retries on): a task attempt that fails after processing part of its range of both inputs is
retried, and no element of either input counts twice. Runs in a subprocess (one
SparkContext per process)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.spark import LOCAL_CLUSTER, run_driver

SCRIPT = """
from pyspark import cloudpickle
import coprocess_functions
from coprocess_functions import OUT_SCHEMA, FailFirstAttemptPayments, OrderPayments, stored_seen
from flinkstate.connector import coprocess
cloudpickle.register_pickle_by_value(coprocess_functions)
chk, marker = sys.argv[1] + "/chk", sys.argv[1] + "/marker"
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
"""

CONF = {"spark.ui.enabled": "false", "spark.executor.memory": "768m", "spark.task.maxFailures": "2"}
"""Two executors, and a task that fails once is retried once."""


@pytest.mark.slow
def test_retried_attempt_on_two_executors_counts_each_input_once(tmp_path: Path) -> None:
    done = run_driver(SCRIPT, str(tmp_path), master=LOCAL_CLUSTER, conf=CONF, log_level="OFF",
                      directory=tmp_path / "driver")  # fmt: skip
    assert "COPROCESS-CLUSTER-OK" in done.stdout, done.stderr[-6000:]
    from flinkstate.checkpoint import CheckpointStorage

    assert CheckpointStorage(str(tmp_path / "chk")).completed_ids() == [1, 2, 3]
