"""SIGKILL in the middle of a run on the standalone cluster: of an executor JVM (its Worker
launches another), then of a Python worker. A killed run succeeds after Spark's retries or,
with retries off, fails with an error; either way every committed checkpoint holds the
model of the runs that committed, and the next run is exact (heap and RocksDB backends)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from support import procs
from support.cluster import StandaloneCluster
from support.spark import Driver

from .counting import DRIVER, committed_states_match

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def first_marker(markers: Path, driver: Driver, timeout: float = 300) -> int:
    """The pid of the first Python worker that began processing a run (see ``SlowCount``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [int(p.name) for p in markers.iterdir()]
        if pids:
            return pids[0]
        assert driver.running(), driver.wait(0).failure()
        time.sleep(0.05)
    raise AssertionError(f"no task of the slow run started in {timeout} s:\n{driver.stdout()}")


OUTCOMES = {"retried": ("4", [1, 2, 3, 4]), "failing": ("1", [1, 4])}
"""``spark.task.maxFailures`` and the runs that commit: Spark's default retries a task lost
with its process; with one attempt per task, each killed run fails and commits nothing."""


@pytest.mark.parametrize(
    ("backend", "outcome"), [("heap", "retried"), ("rocksdb", "retried"), ("rocksdb", "failing")]
)
def test_sigkill_mid_run(
    spark_cluster: StandaloneCluster, s3_options: dict[str, Any], backend: str, outcome: str, tmp_path: Path
) -> None:
    root = f"s3://{s3_options['bucket']}/jobs/count"
    options = s3_options["options"]
    executor_markers, python_markers = tmp_path / "kill-executor", tmp_path / "kill-python"
    executor_markers.mkdir()
    python_markers.mkdir()
    driver = spark_cluster.start_driver(DRIVER, root, json.dumps(options), backend, "count",
                                        f"slow:{executor_markers}", f"slow:{python_markers}", "count",
                                        conf={"spark.task.maxFailures": OUTCOMES[outcome][0]},
                                        directory=tmp_path / "driver", log_level="WARN")  # fmt: skip
    try:
        worker = first_marker(executor_markers, driver)
        executor = procs.executor_of(worker)
        procs.kill([executor])
        assert procs.wait_gone([executor], 10) == [], "the executor JVM outlived SIGKILL"
        worker = first_marker(python_markers, driver)
        assert procs.is_python_worker(worker), procs.cmdline(worker)
        procs.kill([worker])
    finally:
        done = driver.wait(600)
    print("\n".join(line for line in done.stdout.splitlines() if line.startswith("RUN ")))
    assert done.returncode == 0, done.failure()
    assert "Lost executor" in done.stderr, "Spark did not see the executor die"
    assert "Python worker exited unexpectedly" in done.stderr, "no task saw its Python worker die"
    committed = json.loads(done.lines("DRIVER DONE")[0])
    failed = [line for line in done.lines("RUN ") if " FAILED " in line]
    assert all("[RUN_FAILED]" in line for line in failed), failed  # typed, naming what Spark said
    if outcome == "failing":
        assert failed, done.stdout
        assert committed == OUTCOMES[outcome][1], done.stdout
    else:  # Spark's retries usually save a killed run; when they do not, it commits nothing
        assert {1, 4} <= set(committed) <= set(OUTCOMES[outcome][1]), done.stdout
    committed_states_match(root, options, committed)
