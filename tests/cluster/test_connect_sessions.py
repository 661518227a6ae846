"""Live state across Spark Connect sessions on the standalone cluster: a Connect server runs
as one application over both Workers; each client session gets its own Python workers, but a
RocksDB subtask's kept DB belongs to the executor, so a new session's first run starts warm
wherever a subtask stays on its executor, and state stays exact."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import free_port
from support.cluster import DRIVER_CONF, SPARK_HOME, StandaloneCluster
from support.spark import TESTS

from .counting import committed_states_match

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"

CLIENT = """
import json, sys
sys.path.insert(0, {tests!r})
from pyspark.sql import SparkSession
from cluster.live_runs import drive_live
spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
drive_live(spark, sys.argv[2:])
spark.stop()
"""


@pytest.fixture
def connect_server(spark_cluster: StandaloneCluster, tmp_path: Path) -> Iterator[str]:
    """A Spark Connect server on the cluster (an application holding both Workers' cores)."""
    port = free_port()
    conf = [arg for key, value in {**DRIVER_CONF, "spark.connect.grpc.binding.port": str(port)}.items()
            for arg in ("--conf", f"{key}={value}")]  # fmt: skip
    env = dict(os.environ, SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    log = (tmp_path / "connect.log").open("wb")
    server = subprocess.Popen(
        [f"{SPARK_HOME}/bin/spark-submit", "--class", CONNECT_SERVER, "--master", spark_cluster.url, *conf],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while (
            not (tmp_path / "connect.log").read_text(errors="replace").count("Spark Connect server started")
        ):
            assert server.poll() is None and time.monotonic() < deadline, (
                tmp_path / "connect.log"
            ).read_text()
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _client(remote: str, roots: dict[str, str], options: Any, tmp_path: Path, *steps: str) -> list[Any]:
    script = tmp_path / "client.py"
    script.write_text(CLIENT.format(tests=TESTS))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    args = [sys.executable, str(script), remote, json.dumps(roots), json.dumps(options), *steps]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-6000:]
    return [
        json.loads(line.split(" ", 2)[2]) for line in done.stdout.splitlines() if line.startswith("LIVE ")
    ]


def test_a_new_connect_session_finds_the_kept_state(
    connect_server: str, s3_options: dict[str, Any], tmp_path: Path
) -> None:
    roots = {"rocksdb": f"s3://{s3_options['bucket']}/jobs/rocksdb"}
    options = s3_options["options"]
    first = _client(connect_server, roots, options, tmp_path, "run", "run")
    second = _client(connect_server, roots, options, tmp_path, "after:2", "run", "run", "run")
    assert [r["run"] for r in first] == [1, 2] and [r["run"] for r in second] == [3, 4, 5]
    runs = first + second  # the second session's runs continue the first's checkpoints
    assert [r["checkpoint"] for r in runs] == [1, 2, 3, 4, 5]
    for before, now in itertools.pairwise(runs):
        for subtask, start in enumerate(now["starts"]):
            if now["executors"][subtask] == before["executors"][subtask]:
                assert start == "warm" and now["downloaded"][subtask] == 0, (now["run"], subtask, start)
    committed_states_match(roots["rocksdb"], options, [1, 2, 3, 4, 5])
