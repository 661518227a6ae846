"""``process`` beside a rollback: the next run continues from the rolled-back state (no live
backend kept from the replaced state is reused), and a run that started before the
rollback commits nothing (``[CONCURRENT_RUN]``)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage, Storage, rollback
from flinkstate.connector import ProcessError, process

import process_functions
from process_functions import WordCount, stored_counts

WC_SCHEMA = "word string, count bigint"


@pytest.fixture(autouse=True, scope="module")
def _functions_by_value() -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(process_functions)


def _counts(spark: Any, words: list[str], root: str, backend: str) -> dict[str, int]:
    df = spark.createDataFrame([(w,) for w in words], "word string")
    out = process(df, "word", WordCount(), WC_SCHEMA, root, "wc", parallelism=2, backend=backend)
    return {r["word"]: r["count"] for r in out.collect()}


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_the_run_after_a_rollback_continues_from_the_rolled_back_state(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    root = str(tmp_path / "c")
    assert _counts(spark, ["a"], root, backend) == {"a": 1}
    assert _counts(spark, ["a", "b"], root, backend) == {"a": 2, "b": 1}  # kept live: a=2, b=1
    rollback(Storage(root), 1)
    assert stored_counts(root) == {"a": 1}
    assert _counts(spark, ["a", "c"], root, backend) == {"a": 2, "c": 1}  # not a=3: chk-2's state is gone
    assert stored_counts(root) == {"a": 2, "c": 1}
    assert CheckpointStorage(root).completed_ids() == [2, 3, 4]  # process keeps 3


def test_a_run_that_started_before_a_rollback_commits_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = importlib.import_module("flinkstate.connector.process.run")  # `process` is shadowed
    root = str(tmp_path / "c")
    _counts(spark, ["a"], root, "heap")
    _counts(spark, ["a", "b"], root, "heap")

    class RolledBackMeanwhile(CheckpointStorage):
        def begin(self, *args: Any, **kwargs: Any) -> Any:
            pending = super().begin(*args, **kwargs)
            add = pending.add

            def add_after_rollback(result: Any) -> None:  # once the run's tasks are done
                if CheckpointStorage(root).latest_id() == 2:
                    rollback(Storage(root), 1)
                add(result)

            pending.add = add_after_rollback
            return pending

    monkeypatch.setattr(runner, "CheckpointStorage", RolledBackMeanwhile)
    with pytest.raises(
        ProcessError, match=r"\[CONCURRENT_RUN\] checkpoint 4 was committed .* from checkpoint 2"
    ):
        _counts(spark, ["a", "c"], root, "heap")
    monkeypatch.undo()
    assert CheckpointStorage(root).completed_ids() == [1, 2, 4]  # the run had begun chk-3
    assert stored_counts(root) == {"a": 1}
    assert _counts(spark, ["a"], root, "heap") == {"a": 2}
