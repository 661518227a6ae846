"""The Spark runner across runs: where the input is split into runs, concurrent runs on one
root, restarted streaming queries, broadcast elements applied once per query."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.connector import ProcessError, foreach_batch, process

import process_functions
from process_functions import (
    BatchLog,
    ExitWorker,
    Sessions,
    ThresholdAlerts,
    WordCount,
    sessions_model,
    stored_counts,
)

SESSIONS = "user string, start bigint, end bigint, events bigint"
WC_SCHEMA = "word string, count bigint"


@pytest.fixture(autouse=True, scope="module")
def _functions_by_value() -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(process_functions)


def _sessions(spark: Any, runs: list[list[tuple[str, int]]], root: Path, **options: Any) -> list[Any]:
    out: list[Any] = []
    for i, rows in enumerate(runs):
        df = spark.createDataFrame(rows, "user string, ts bigint")
        result = process(df, "user", Sessions(), SESSIONS, str(root), "s", event_time="ts",
                         end_of_input=i == len(runs) - 1, **options)  # fmt: skip
        out += [tuple(r) for r in result.collect()]
    return sorted(out)


def test_splitting_in_order_input_at_a_tie_gives_the_one_run_answer(spark: Any, tmp_path: Path) -> None:
    """u's session ends at 0, its timer is at 30 (GAP); u@30 extends it. A run that ends at
    v@30 must not fire the timer at 30: an element at 30 may still come (Flink's watermark
    after the largest event time t is t - delay - 1)."""
    events = [("u", 0), ("v", 30), ("u", 30), ("w", 45), ("u", 60), ("w", 60), ("v", 60), ("w", 90)]
    model = sessions_model(events)
    assert model == [("u", 0, 60, 3), ("v", 30, 60, 2), ("w", 45, 90, 3)]
    assert _sessions(spark, [events], tmp_path / "one", parallelism=1) == model
    ties = [i for i in range(1, len(events)) if events[i - 1][1] == events[i][1]]
    assert ties == [2, 5, 6]
    for cut in ties:
        split = [events[:cut], events[cut:]]
        assert _sessions(spark, split, tmp_path / f"cut{cut}", parallelism=2) == model, cut
        props = open_checkpoint(str(tmp_path / f"cut{cut}")).manifest.properties
        assert int(props["flinkstate.process.watermark"]) == 90 - 1
    every = [events[:2], events[2:5], events[5:6], events[6:]]  # every tie a run boundary
    assert _sessions(spark, every, tmp_path / "every", parallelism=1, watermark_delay=0) == model
    assert CheckpointStorage(str(tmp_path / "every")).latest_id() == 4


def _words(spark: Any, words: list[str]) -> Any:
    return spark.createDataFrame([(w,) for w in words], "word string")


@pytest.mark.connect
def test_a_restarted_query_whose_batch_ids_went_back_is_an_error(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "c")
    delivered: list[tuple[int, list[Any]]] = []

    def sink(out: Any, batch_id: int) -> None:
        delivered.append((batch_id, sorted(map(tuple, out.collect()))))

    first = foreach_batch("word", WordCount(), WC_SCHEMA, root, "wc", sink=sink)
    first(_words(spark, ["a"]), 0)
    first(_words(spark, ["a", "b"]), 1)
    # the query restarts with a new Spark checkpointLocation: its batch ids start at 0 again
    again = foreach_batch("word", WordCount(), WC_SCHEMA, root, "wc", sink=sink)
    with pytest.raises(ProcessError, match=r"\[BATCH_ID_BEHIND\] micro-batch 0 comes after batch 1"):
        again(_words(spark, ["a", "a", "a"]), 0)
    assert CheckpointStorage(root).latest_id() == 2 and stored_counts(root) == {"a": 2, "b": 1}
    again(_words(spark, ["z"]), 1)  # the last committed batch: a replay, its output again
    again(_words(spark, ["b"]), 2)
    assert delivered == [
        (0, [("a", 1)]),
        (1, [("a", 2), ("b", 1)]),
        (1, [("a", 2), ("b", 1)]),
        (2, [("b", 2)]),
    ]
    assert stored_counts(root) == {"a": 2, "b": 2}


@pytest.mark.connect
@pytest.mark.parametrize("when", ["begin", "tasks", "publish"])
def test_a_run_that_another_run_committed_under_commits_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Run B reads checkpoint 1; run A commits checkpoint 2 before B begins its checkpoint,
    after B's tasks ran, or after B checked the root and before it publishes (B's check then
    reads what it read before). B's state lacks A's changes: committing it would lose them."""
    import importlib

    runner = importlib.import_module("flinkstate.connector.process.run")  # `process` is shadowed
    root = str(tmp_path / "c")
    process(_words(spark, ["a"]), "word", WordCount(), WC_SCHEMA, root, "wc", parallelism=2).collect()
    run_a, run_b = _words(spark, ["a", "b"]), _words(spark, ["a", "c"])
    interleaved: list[Any] = []

    def run_a_once() -> None:
        if not interleaved:
            interleaved.append(None)
            interleaved[0] = process(run_a, "word", WordCount(), WC_SCHEMA, root, "wc")

    class Interleaving(CheckpointStorage):
        stale: int | None = None

        def begin(self, *args: Any, **kwargs: Any) -> Any:
            if when == "begin":
                run_a_once()
            pending = super().begin(*args, **kwargs)
            if when != "begin" and not interleaved:  # B's: A commits once B's tasks are done
                add = pending.add

                def add_after_a(result: Any) -> None:
                    if not interleaved:
                        run_a_once()
                        self.stale = 1 if when == "publish" else None
                    add(result)

                pending.add = add_after_a
            return pending

        def latest_id(self) -> int | None:
            stale, self.stale = self.stale, None
            return stale if stale is not None else super().latest_id()

    monkeypatch.setattr(runner, "CheckpointStorage", Interleaving)
    with pytest.raises(
        ProcessError, match=r"\[CONCURRENT_RUN\] checkpoint 2 was committed .* from checkpoint 1"
    ):
        process(run_b, "word", WordCount(), WC_SCHEMA, root, "wc")
    monkeypatch.undo()
    assert sorted(map(tuple, interleaved[0].collect())) == [("a", 2), ("b", 1)]
    assert CheckpointStorage(root).completed_ids() == [1, 2]
    assert stored_counts(root) == {"a": 2, "b": 1}
    chk2 = tmp_path / "c" / "chk-2"
    used = {os.path.normpath(chk2 / f.path) for f in open_checkpoint(root).manifest.files()}
    assert {str(f) for f in chk2.rglob("*") if f.is_file() and f.name != "_metadata"} <= used  # B's are gone
    out = process(_words(spark, ["a", "c"]), "word", WordCount(), WC_SCHEMA, root, "wc")  # run again
    assert sorted(map(tuple, out.collect())) == [("a", 3), ("c", 1)]


def _alerts(root: str, rules: Any, log: BatchLog) -> Any:
    return foreach_batch("word", ThresholdAlerts(), WC_SCHEMA, root, "alerts", sink=log, broadcast=rules)


@pytest.mark.connect
def test_foreach_batch_applies_broadcast_elements_once_per_query(spark: Any, tmp_path: Path) -> None:
    """ThresholdAlerts resets every count when a rule arrives: applied on every micro-batch,
    the rules would reset the counts each batch and the alert at the third "a" never come."""
    root, delivered = str(tmp_path / "c"), BatchLog(tmp_path / "log", sort=True)
    rules = spark.createDataFrame([("a", 3)], "word string, threshold bigint")
    run = _alerts(root, rules, delivered)
    run(_words(spark, ["a", "a"]), 0)
    run(_words(spark, ["a"]), 1)
    run = _alerts(root, rules, delivered)  # a restart: the same rules, still applied once
    run(_words(spark, ["a", "b"]), 2)
    more = spark.createDataFrame([("a", 3), ("b", 1)], "word string, threshold bigint")
    run = _alerts(root, more, delivered)  # other elements: applied (the counts reset), once
    run(_words(spark, ["b", "a"]), 3)
    run(_words(spark, ["a", "a"]), 4)
    assert delivered.batches() == [(0, []), (1, [("a", 3)]), (2, []), (3, [("b", 1)]), (4, [("a", 3)])]
    assert stored_counts(root, "alerts") == {"a": 3, "b": 1}
    # process() is a bounded run of both streams: each call applies its broadcast elements
    out = process(_words(spark, ["a"]), "word", ThresholdAlerts(), WC_SCHEMA, root, "alerts", broadcast=more)
    assert out.collect() == [] and stored_counts(root, "alerts") == {"a": 1}


@pytest.mark.connect
def test_a_streaming_query_with_a_broadcast_side(spark: Any, tmp_path: Path) -> None:
    root, inbox = str(tmp_path / "c"), str(tmp_path / "inbox")
    delivered = BatchLog(tmp_path / "log", sort=True)  # the query's sink runs on the server over Connect
    rules = spark.createDataFrame([("a", 3), ("c", 2)], "word string, threshold bigint")
    for words in (["a", "a", "c"], ["a", "b"], ["c", "a", "a"], ["a"]):  # a restart for each file
        _words(spark, words).coalesce(1).write.mode("append").json(inbox)
        stream = spark.readStream.schema("word string").option("maxFilesPerTrigger", 1).json(inbox)
        writer = stream.writeStream.foreachBatch(_alerts(root, rules, delivered))
        writer = writer.option("checkpointLocation", str(tmp_path / "spark")).trigger(availableNow=True)
        writer.start().awaitTermination(120)
    assert delivered.batches() == [(0, []), (1, [("a", 3)]), (2, [("c", 2)]), (3, [])]
    assert stored_counts(root, "alerts") == {"a": 6, "b": 1, "c": 2}


def test_a_run_whose_spark_job_fails_is_a_typed_error_and_commits_nothing(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "chk")
    df = spark.createDataFrame([("a",), ("b",)], "word string")
    process(df, "word", WordCount(), "word string, count bigint", root, "wc", parallelism=1)
    with pytest.raises(ProcessError, match=r"\[RUN_FAILED\].*checkpoint 1 is still the latest") as failed:
        process(df, "word", ExitWorker(), "word string, count bigint", root, "wc", parallelism=1)
    assert failed.value.__cause__ is not None  # Spark's own error, chained
    assert CheckpointStorage(root).completed_ids() == [1]
    assert stored_counts(root) == {"a": 1, "b": 1}
