"""A multi-executor Spark (local-cluster: two executor JVMs with their own Python workers):
nothing may rely on the driver's process. Runs in a subprocess, since a process holds one
SparkContext and the session fixture already holds one."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.spark import LOCAL_CLUSTER, run_driver

SCRIPT = """
path = sys.argv[1]
assert spark.range(0, 8, 1, 8).rdd.map(lambda _: os.getpid()).distinct().count() == 2
df = spark.range(0, 5000, 1, 4).selectExpr("id % 500 as user", "id as v")
(df.write.format("flinkstate").mode("overwrite").option("operator", "op").option("state", "last")
   .option("stateType", "list").option("keyColumns", "user").option("parallelism", "3")
   .option("sharedFilesystem", "true").save(path))  # one host: the local path is shared
read = spark.read.format("flinkstate").option("operator", "op").option("state", "last").load(path)
assert read.count() == 5000
assert read.filter("key = 7").count() == 10
assert sorted(r.state for r in spark.read.format("flinkstate").load(path).collect()) == ["last"]
print("CLUSTER-OK")
"""


@pytest.mark.slow
def test_read_and_write_on_two_executors(tmp_path: Path) -> None:
    done = run_driver(SCRIPT, str(tmp_path / "sp"), master=LOCAL_CLUSTER,
                      conf={"spark.ui.enabled": "false", "spark.executor.memory": "768m"},
                      directory=tmp_path / "driver")  # fmt: skip
    assert "CLUSTER-OK" in done.stdout, done.stderr[-4000:]
    from flinkstate.checkpoint import open_checkpoint

    backend = open_checkpoint(str(tmp_path / "sp")).keyed_backend("op", 1, 3)
    assert len(list(backend.get_keys("last"))) > 0
