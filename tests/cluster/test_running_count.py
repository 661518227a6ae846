"""The keyed running count on the standalone cluster, checkpoints on the loopback S3 server:
runs on two executors (one a rescale) whose outputs and committed state equal a plain-Python
model exactly, on the heap and the RocksDB backend."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage

from .counting import count_model, stored_counts
from .standalone import StandaloneCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

DRIVER = """
from cluster.counting import drive
drive(spark, sys.argv[1:])
"""
"""The driver of every test here: ``drive`` (see :mod:`.counting`) with the test's arguments."""


def committed_states_match(root: str, options: dict[str, Any], committed: list[int]) -> None:
    """Checkpoint ``n`` is the ``n``-th committed run's (a failed run takes no id): each one
    retained under ``root`` holds the model of the runs committed up to it."""
    ids = CheckpointStorage(root, options).completed_ids()
    assert ids and ids[-1] == len(committed), (ids, committed)
    for checkpoint_id in ids:
        stored = stored_counts(root, options, checkpoint_id)
        model = count_model(committed[:checkpoint_id])
        assert stored == model, f"checkpoint {checkpoint_id}: {len(stored)} keys, model {len(model)}"


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_three_runs_are_exact(
    spark_cluster: StandaloneCluster, s3_options: dict[str, Any], backend: str, tmp_path: Any
) -> None:
    root = f"s3://{s3_options['bucket']}/jobs/count"
    options = s3_options["options"]
    done = spark_cluster.run_driver(DRIVER, root, json.dumps(options), backend, "count", "count", "count",
                                    directory=tmp_path / "driver")  # fmt: skip
    assert done.returncode == 0, done.failure()
    assert done.lines("DRIVER DONE") == ["[1, 2, 3]"], done.failure()
    committed_states_match(root, options, [1, 2, 3])
