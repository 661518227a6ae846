"""A local checkpoint root is refused for writes on a cluster unless declared shared (see
``flinkstate.connector.shared_root``); on a ``local[...]`` master nothing changes. The
multi-executor case itself runs in tests/connector/test_shared_root_cluster.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from flinkstate.checkpoint import CheckpointStorage, Storage
from flinkstate.connector import OptionError, ProcessError, RootNotSharedError, process
from flinkstate.connector.options import WriteOptions
from flinkstate.connector.shared_root import cluster_master
from flinkstate.connector.write.batch import BootstrapWriter
from flinkstate.connector.write.stream import StateSink

from process_functions import WordCount, word_count_model

WRITE = {"operator": "op", "state": "n", "statetype": "value", "keycolumns": "k", "valuecolumns": "v"}


def _session(master: Any) -> Any:
    def get(key: str, default: Any = None) -> Any:
        if isinstance(master, Exception):
            raise master
        return master if key == "spark.master" else default

    return SimpleNamespace(conf=SimpleNamespace(get=get))


@pytest.mark.parametrize(
    ("master", "cluster"),
    [("local", False), ("local[2]", False), ("local[*, 3]", False), ("local-cluster[2,1,1024]", True),
     ("spark://h:7077", True), ("yarn", True), ("k8s://https://h:443", True), (None, False),
     (RuntimeError("no conf"), False)],
)  # fmt: skip
def test_a_cluster_is_any_master_but_local(master: Any, cluster: bool) -> None:
    assert (cluster_master(_session(master)) is not None) is cluster


def test_the_write_option_is_parsed_once() -> None:
    assert WriteOptions.parse({**WRITE, "path": "/x"}).shared_filesystem is False
    assert WriteOptions.parse({**WRITE, "path": "/x", "sharedFilesystem": "true"}).shared_filesystem is True
    with pytest.raises(OptionError, match=r"\[INVALID_OPTION\] option sharedFilesystem must be true"):
        WriteOptions.parse({**WRITE, "path": "/x", "sharedfilesystem": "shared"})
    with pytest.raises(OptionError, match=r"sharedFilesystem.*do not apply to format flink"):
        WriteOptions.parse({**WRITE, "path": "/x", "sharedfilesystem": "true", "format": "flink"})


def _batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"k": ["a", "b", "c"], "v": [1, 2, 3]})


def _schema() -> Any:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType([StructField("k", StringType()), StructField("v", LongType())])


def _writers(path: str, options: dict[str, str]) -> list[Any]:
    merged = {**WRITE, "path": path, **options}
    return [BootstrapWriter(merged, _schema(), overwrite=True), StateSink(merged, _schema())]


@pytest.mark.parametrize("kind", ["batch", "stream"])
def test_a_task_in_another_jvm_refuses_a_local_root_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The writers are made on the driver (its JVM's block-manager directories), their tasks run
    on an executor (another JVM's); Spark hands a Python worker its JVM's in SPARK_LOCAL_DIRS."""
    pick = 0 if kind == "batch" else 1
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/tmp/blockmgr-driver")
    refused = _writers(str(tmp_path / "local"), {})[pick]
    declared = _writers(str(tmp_path / "declared"), {"sharedFilesystem": "true"})[pick]
    shared = _writers(f"memory://flinkstate-tests/{tmp_path.name}", {})[pick]
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/tmp/spark-1/executor-0/blockmgr-executor")
    with pytest.raises(RootNotSharedError, match=r"^\[LOCAL_ROOT_NOT_SHARED\] .*sharedFilesystem=true"):
        refused.write(iter([_batch()]))
    assert not list((tmp_path / "local").rglob("*.parquet"))
    for writer in (declared, shared):
        assert writer.write(iter([_batch()])).files
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/tmp/blockmgr-driver")  # local[...]: the driver's JVM
    assert _writers(str(tmp_path / "local"), {})[pick].write(iter([_batch()])).files
    Storage(f"memory://flinkstate-tests/{tmp_path.name}").delete("")


def test_on_a_local_master_nothing_changes(spark: Any, tmp_path: Path) -> None:
    assert cluster_master(spark) is None
    words = ["a", "b", "a"]
    df = spark.createDataFrame([(w,) for w in words], "word string")
    out = process(df, "word", WordCount(), "word string, count bigint", str(tmp_path / "p"), "wc")
    finals: dict[str, int] = {}
    for row in out.collect():
        finals[row.word] = max(finals.get(row.word, 0), row["count"])
    assert finals == word_count_model(words)
    (spark.createDataFrame([("a", 1)], "k string, v bigint").write.format("flinkstate").mode("overwrite")
     .option("operator", "op").option("state", "n").option("stateType", "value").option("keyColumns", "k")
     .save(str(tmp_path / "w")))  # fmt: skip
    assert CheckpointStorage(str(tmp_path / "w")).completed_ids() == [1]
    with pytest.raises(ProcessError, match="option shared_filesystem must be a bool"):
        process(df, "word", WordCount(), "word string, count bigint", str(tmp_path / "p"), "wc",
                shared_filesystem="yes")  # fmt: skip
