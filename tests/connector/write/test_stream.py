"""The streaming sink: upserts per micro-batch, deletes, replays, restarts, compaction."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from flinkstate.checkpoint import open_checkpoint
from flinkstate.checkpoint.errors import CheckpointError
from flinkstate.connector.write import stream
from flinkstate.connector.write.stream import StateSink


def _run(spark: Any, source: Path, target: Path, chk: Path, **options: str) -> None:
    query = (
        spark.readStream.schema("user long, count long, op string")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.format("flinkstate")
        .option("checkpointLocation", str(chk))
        .option("operator", "op")
        .option("state", "count")
        .option("stateType", options.pop("stateType", "value"))
        .option("keyColumns", "user")
        .option("valueColumns", "count")
        .option("opColumn", "op")
    )
    for k, v in options.items():
        query = query.option(k, v)
    handle = query.trigger(availableNow=True).start(str(target))
    handle.awaitTermination()


def _batch(source: Path, name: str, rows: list[dict[str, Any]]) -> None:
    source.mkdir(exist_ok=True)
    (source / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _state(spark: Any, target: Path) -> dict[int, Any]:
    df = spark.read.format("flinkstate").option("operator", "op").option("state", "count").load(str(target))
    return {r.key: r.value for r in df.collect()}


@pytest.mark.connect
def test_upserts_and_deletes_across_a_restart(spark: Any, tmp_path: Path) -> None:
    source, target, chk = tmp_path / "in", tmp_path / "out", tmp_path / "spark-chk"
    _batch(source, "a.json", [{"user": i, "count": i, "op": "upsert"} for i in range(10)])
    _run(spark, source, target, chk)
    assert _state(spark, target) == {i: i for i in range(10)}
    _batch(
        source, "b.json", [{"user": 1, "count": 100, "op": "upsert"}, {"user": 9, "count": 0, "op": "delete"}]
    )
    _run(spark, source, target, chk)  # a restarted query continues
    expected = {i: i for i in range(9)} | {1: 100}
    assert _state(spark, target) == expected
    manifest = open_checkpoint(str(target)).manifest
    assert manifest.properties["spark.batch_id"] == "1"
    backend = open_checkpoint(str(target)).keyed_backend("op", 0, 1)
    from flinkstate.state import Types, ValueStateDescriptor

    backend.set_current_key(1)
    assert backend.get_state(ValueStateDescriptor("count", Types.LONG())).value() == 100
    backend.set_current_key(9)
    assert backend.get_state(ValueStateDescriptor("count", Types.LONG())).value() is None
    feed = (  # every version is an incremental checkpoint: its batch is its change feed
        spark.read.format("flinkstate")
        .option("operator", "op")
        .option("state", "count")
        .option("readChangeFeed", "true")
        .option("changeStartCheckpointId", "2")
        .load(str(target))
    )
    assert sorted((r.checkpoint_id, r.key, r.value, r.change_type) for r in feed.collect()) == [
        (2, 1, 100, "update"),
        (2, 9, None, "delete"),
    ]


def test_list_state_appends_per_batch(spark: Any, tmp_path: Path) -> None:
    source, target, chk = tmp_path / "in", tmp_path / "out", tmp_path / "spark-chk"
    _batch(source, "a.json", [{"user": 1, "count": 1, "op": "upsert"}])
    _run(spark, source, target, chk, stateType="list")
    _batch(source, "b.json", [{"user": 1, "count": 2, "op": "upsert"}])
    _run(spark, source, target, chk, stateType="list")
    df = (
        spark.read.format("flinkstate")
        .option("operator", "op")
        .option("state", "count")
        .option("flatten", "false")
    )
    assert [r.value for r in df.load(str(target)).collect()] == [[1, 2]]


def _sink(tmp_path: Path) -> StateSink:
    schema = StructType(
        [StructField("user", LongType()), StructField("count", LongType()), StructField("op", StringType())]
    )
    options = {"path": str(tmp_path / "out"), "operator": "op", "state": "count", "statetype": "value",
               "keycolumns": "user", "valuecolumns": "count", "opcolumn": "op"}  # fmt: skip
    return StateSink(options, schema)


def _rows(users: list[int], count: int) -> pa.RecordBatch:
    return pa.record_batch(
        [
            pa.array(users, pa.int64()),
            pa.array([count] * len(users), pa.int64()),
            pa.array(["u"] * len(users)),
        ],
        names=["user", "count", "op"],
    )


def test_replayed_batch_changes_nothing(tmp_path: Path) -> None:
    sink = _sink(tmp_path)
    sink.commit([sink.write(iter([_rows([1, 2], 5)]))], 0)
    before = open_checkpoint(str(tmp_path / "out")).manifest
    replay = sink.write(iter([_rows([1, 2], 99)]))  # Spark commits a failed batch again
    sink.commit([replay], 0)
    after = open_checkpoint(str(tmp_path / "out")).manifest
    assert after.checkpoint_id == before.checkpoint_id and after.files() == before.files()
    data = tmp_path / "out" / "_data"
    assert sorted(p.name for p in data.iterdir()) == sorted(Path(f.path).name for f in after.files())


def test_an_earlier_batch_id_is_an_error_not_skipped(tmp_path: Path) -> None:
    """A query restarted with a new checkpointLocation counts from batch 0 again: its
    batches are refused, not dropped, and leave the state and the data directory as they were."""
    sink = _sink(tmp_path)
    for batch in range(3):
        sink.commit([sink.write(iter([_rows([batch], batch)]))], batch)
    before = open_checkpoint(str(tmp_path / "out")).manifest
    data = tmp_path / "out" / "_data"
    files = sorted(p.name for p in data.iterdir())
    restarted = sink.write(iter([_rows([7], 70)]))
    with pytest.raises(CheckpointError, match=r"\[BATCH_ID_BEHIND\] batch 0 is before batch 2"):
        sink.commit([restarted], 0)
    after = open_checkpoint(str(tmp_path / "out")).manifest
    assert after.checkpoint_id == before.checkpoint_id and after.files() == before.files()
    assert sorted(p.name for p in data.iterdir()) == files


def test_many_batches_are_compacted_and_old_versions_collected(tmp_path: Path) -> None:
    sink = _sink(tmp_path)
    for batch in range(stream.COMPACT_AFTER + 3):
        sink.commit([sink.write(iter([_rows([batch % 5, 100 + batch], batch)]))], batch)
    checkpoint = open_checkpoint(str(tmp_path / "out"))
    files = checkpoint.manifest.operators[0].subtasks[0].keyed["count"]
    assert len(files) <= stream.COMPACT_AFTER
    backend = checkpoint.keyed_backend("op", 0, 1)
    from flinkstate.state import Types, ValueStateDescriptor

    state = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
    for user in range(5):
        backend.set_current_key(user)
        assert state.value() == max(b for b in range(stream.COMPACT_AFTER + 3) if b % 5 == user)
    versions = sorted(p.name for p in (tmp_path / "out").iterdir() if p.name.startswith("chk-"))
    assert len(versions) <= stream.RETAIN
    referenced = {Path(f.path).name for f in checkpoint.manifest.files()}
    assert {p.name for p in (tmp_path / "out" / "_data").iterdir()} == referenced


def test_rate_source_across_a_restart(spark: Any, tmp_path: Path) -> None:
    """The built-in rate source (unbounded): run, stop, restart; state keeps accumulating."""
    target, chk = tmp_path / "out", tmp_path / "spark-chk"

    def run_for(seconds: float) -> None:
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 50)
            .load()
            .selectExpr("value % 5 as sensor", "value as reading")
            .writeStream.format("flinkstate")
            .option("checkpointLocation", str(chk))
            .option("operator", "op")
            .option("state", "readings")
            .option("stateType", "list")
            .option("keyColumns", "sensor")
            .trigger(processingTime="500 milliseconds")
            .start(str(target))
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (query.lastProgress or {}).get("batchId", -1) < 2:
            time.sleep(0.5)
        time.sleep(seconds)
        query.stop()

    def readings() -> list[int]:
        df = (
            spark.read.format("flinkstate")
            .option("operator", "op")
            .option("state", "readings")
            .load(str(target))
        )
        return sorted(r.value for r in df.collect())

    run_for(1.0)
    first = readings()
    batch = int(open_checkpoint(str(target)).manifest.properties["spark.batch_id"])
    assert first and first == list(range(len(first)))  # every row once, none twice
    run_for(1.0)
    second = readings()
    assert len(second) > len(first) and second == list(range(len(second)))
    assert int(open_checkpoint(str(target)).manifest.properties["spark.batch_id"]) > batch
