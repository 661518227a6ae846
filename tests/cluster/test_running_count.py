"""The keyed running count on the standalone cluster, checkpoints on the loopback S3 server:
runs on two executors (one a rescale) whose outputs and committed state equal a plain-Python
model exactly, on the heap and the RocksDB backend."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .counting import DRIVER, committed_states_match
from .standalone import StandaloneCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


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
