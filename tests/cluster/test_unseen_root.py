"""A local checkpoint root that one host of the cluster cannot see (its Worker has a
filesystem of its own there, as on any multi-host cluster), wrongly declared shared: every
write fails with a typed error and publishes nothing, where it used to commit checkpoints
whose files only that host held."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import StandaloneCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

DRIVER = """
import json
from process_functions import WordCount
from flinkstate.connector import process
root, written = sys.argv[1], sys.argv[2]
dirs = spark.range(0, 16, 1, 16).rdd.map(lambda _: os.environ["SPARK_LOCAL_DIRS"]).distinct().count()
print("EXECUTORS", dirs, flush=True)
df = spark.createDataFrame([(f"k{i}", i) for i in range(2000)], "word string, n bigint").repartition(4)
for name, write in [
    ("process", lambda: process(df, "word", WordCount(), "word string, count bigint", root, "wc",
                                parallelism=4, shared_filesystem=True)),
    ("write", lambda: df.write.format("flinkstate").mode("overwrite").option("operator", "op")
        .option("state", "seen").option("stateType", "value").option("keyColumns", "word")
        .option("parallelism", "4")
        .option("sharedFilesystem", "true").save(written)),
]:
    try:
        write()
        print("OUTCOME", name, "committed", flush=True)
    except Exception as error:
        print("OUTCOME", name, json.dumps(str(error)[:2000]), flush=True)
"""


@pytest.fixture
def split_cluster(tmp_path: Path) -> Iterator[tuple[StandaloneCluster, Path]]:
    """Two Workers; the second sees ``shared`` as an empty directory of its own."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (tmp_path / "cluster").mkdir()
    cluster = StandaloneCluster(tmp_path / "cluster", workers=2, private={1: shared})
    yield cluster, shared
    cluster.stop()


def test_a_root_one_host_cannot_see_is_never_committed(split_cluster: tuple[StandaloneCluster, Path]) -> None:
    from flinkstate.checkpoint import CheckpointStorage

    cluster, shared = split_cluster
    root, written = shared / "jobs" / "wc", shared / "savepoints" / "seen"
    conf = {"spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s"}  # fmt: skip
    done = cluster.run_driver(DRIVER, str(root), str(written), conf=conf, timeout=600)
    assert done.returncode == 0, done.failure()
    assert done.lines("EXECUTORS") == ["2"], done.failure()
    outcomes = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in done.lines("OUTCOME")}
    assert set(outcomes) == {"process", "write"}, done.stdout
    for name, outcome in outcomes.items():
        assert outcome != "committed", f"{name} committed a checkpoint one host's files make up"
        assert "[COMMIT_FILES_MISSING]" in json.loads(outcome), (name, outcome)
    assert CheckpointStorage(str(root)).latest_id() is None
    assert not list(shared.rglob("_metadata"))  # nothing published, for any reader
