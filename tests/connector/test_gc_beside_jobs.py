"""``flinkstate gc`` beside running jobs: a streaming batch and a ``process`` run paused
between writing their files and committing lose nothing to it; every row reads back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType
from typer.testing import CliRunner

from flinkstate.checkpoint import PendingCheckpoint, open_checkpoint
from flinkstate.cli import app
from flinkstate.connector import process
from flinkstate.connector.write.batch import task_files
from flinkstate.connector.write.stream import StateSink
from flinkstate.state import Types, ValueStateDescriptor

import process_functions
from process_functions import WordCount, stored_counts, word_count_model


def _gc(root: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["gc", str(root), "--retain", "1", "--json", *args])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _sink(root: Path) -> StateSink:
    schema = StructType(
        [StructField("user", LongType()), StructField("count", LongType()), StructField("op", StringType())]
    )
    options = {"path": str(root), "operator": "op", "state": "count", "statetype": "value",
               "keycolumns": "user", "valuecolumns": "count", "parallelism": "2"}  # fmt: skip
    return StateSink(options, schema)


def _rows(users: range, count: int) -> pa.RecordBatch:
    return pa.record_batch(
        [
            pa.array(list(users), pa.int64()),
            pa.array([count] * len(users), pa.int64()),
            pa.array(["u"] * len(users)),
        ],
        names=["user", "count", "op"],
    )


def _restored(root: Path) -> dict[int, int]:
    checkpoint = open_checkpoint(str(root))
    out = {}
    for subtask in range(2):
        backend = checkpoint.keyed_backend("op", subtask, 2)
        state = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
        for key in list(backend.get_keys("count")):
            backend.set_current_key(key)
            out[key] = state.value()
    return out


def test_gc_during_a_streaming_batch(tmp_path: Path) -> None:
    root = tmp_path / "out"
    sink = _sink(root)
    sink.commit([sink.write(iter([_rows(range(0, 50), 1)]))], 0)
    sink.commit([sink.write(iter([_rows(range(50, 100), 2)]))], 1)
    # batch 2: the tasks have written their files under _data; the driver has not committed
    messages = [sink.write(iter([_rows(range(100, 150), 3)])), sink.write(iter([_rows(range(0, 10), 4)]))]
    pending = [root / "_data" / ref.path for _, ref in task_files(messages)]
    doc = _gc(root)
    assert doc["kept"] == [2] and doc["removed_checkpoints"] == [1]
    assert all(path.exists() for path in pending) and len(doc["young"]) == len(pending) > 0
    sink.commit(messages, 2)
    model = {u: 1 for u in range(0, 50)} | {u: 2 for u in range(50, 100)} | {u: 3 for u in range(100, 150)}
    model |= {u: 4 for u in range(0, 10)}
    assert _restored(root) == model
    _gc(root)  # retires batch 1's version: what the committed batch references stays
    assert _restored(root) == model


@pytest.fixture
def _functions_by_value() -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(process_functions)


@pytest.mark.usefixtures("_functions_by_value")
def test_gc_during_a_process_run(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "chk"
    first, second = ["a", "b", "a", "c"] * 5, ["b", "d", "a", "e"] * 5
    schema = "word string, count bigint"
    df1 = spark.createDataFrame([(w,) for w in first], "word string")
    process(df1, "word", WordCount(), schema, str(root), "wc", parallelism=2).collect()
    commit = PendingCheckpoint.commit
    collected: list[dict[str, Any]] = []

    def gc_then_commit(self: PendingCheckpoint, properties: Any = None) -> Any:
        collected.append(_gc(root))  # the run's tasks have written their files
        return commit(self, properties)

    monkeypatch.setattr(PendingCheckpoint, "commit", gc_then_commit)
    df2 = spark.createDataFrame([(w,) for w in second], "word string")
    out = process(df2, "word", WordCount(), schema, str(root), "wc", parallelism=2).collect()
    monkeypatch.undo()
    assert len(collected) == 1 and collected[0]["kept"] == [1]
    assert len(out) == len(second)
    assert {w: max(n for x, n in out if x == w) for w in set(second)} == {
        w: n for w, n in word_count_model(first + second).items() if w in second
    }
    assert stored_counts(root) == word_count_model(first + second)
