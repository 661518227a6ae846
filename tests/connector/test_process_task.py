"""The executor side of the runner without a SparkSession: a task's live backend is kept
for exactly the checkpoint its run wrote, and a failed attempt never leaves one behind."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flinkstate.checkpoint import CheckpointStorage, SubtaskResult
from flinkstate.connector import ProcessError
from flinkstate.connector.output import OutputSchema
from flinkstate.connector.process_task import _KEPT, ROUTE, SEQ, TaskPlan, run_subtask
from flinkstate.connector.routing import route_values
from flinkstate.state import ProcessFunctionError, Types
from flinkstate.state.ttl.time import LONG_MIN

from process_functions import Failing, WordCount


def _schema() -> OutputSchema:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return OutputSchema.of(StructType([StructField("word", StringType()), StructField("count", LongType())]))


def _plan(
    root: Path, function: Any, token: str, base: Any = None, base_token: str | None = None
) -> tuple[Any, Any]:
    storage = CheckpointStorage(str(root))
    pending = storage.begin()
    plan = TaskPlan(
        "wc",
        function,
        "heap",
        ("word",),
        Types.STRING(),
        ("word",),
        None,
        1,
        128,
        pending.directory,
        storage.storage.url,
        None if base is None else base.manifest,
        None if base is None else base.directory,
        base_token,
        token,
        LONG_MIN,
        LONG_MIN,
        0,
        False,
        (),
        _schema(),
    )
    return plan, pending


def _batch(words: list[str], route: int | None = None) -> pa.RecordBatch:
    r = route_values(1)[0] if route is None else route
    return pa.RecordBatch.from_pydict(
        {"word": words, SEQ: list(range(len(words))), ROUTE: [r] * len(words)},
        schema=pa.schema([("word", pa.string()), (SEQ, pa.int64()), (ROUTE, pa.int32())]),
    )


def _run(plan: Any, words: list[str]) -> tuple[list[SubtaskResult], dict[str, int]]:
    (out,) = list(run_subtask(plan, iter([_batch(words)])))
    results, stats = pickle.loads(out.column(0)[0].as_py())
    return results, stats


def test_kept_backend_only_for_the_checkpoint_it_wrote(tmp_path: Path) -> None:
    _KEPT.clear()
    plan, pending = _plan(tmp_path, WordCount(), "t1")
    results, stats = _run(plan, ["a", "b", "a"])
    assert stats == {"rows": 3, "output": 3, "reused": 0}
    for r in results:
        pending.add(r)
    first = pending.commit()
    plan, pending = _plan(tmp_path, WordCount(), "t2", first, "t1")
    results, stats = _run(plan, ["a"])
    assert stats["reused"] == 1
    for r in results:
        pending.add(r)
    second = pending.commit()
    # an attempt that fails drops what it held: the retry restores from the checkpoint
    plan, pending = _plan(tmp_path, Failing(), "t3", second, "t2")
    with pytest.raises(ProcessFunctionError, match="'boom'"):
        _run(plan, ["a", "boom"])
    assert not _KEPT
    plan, pending = _plan(tmp_path, WordCount(), "t3", second, "t2")
    results, stats = _run(plan, ["a"])
    assert stats["reused"] == 0
    backend = second.keyed_backend("wc", 0, 1)
    assert sorted(backend.get_keys("count")) == ["a", "b"]
    # a different token (another checkpoint was committed meanwhile) is never reused
    plan, _ = _plan(tmp_path, WordCount(), "t4", second, "elsewhere")
    assert _run(plan, ["a"])[1]["reused"] == 0
    _KEPT.clear()


def test_rows_of_another_range_are_refused(tmp_path: Path) -> None:
    plan, _ = _plan(tmp_path, WordCount(), "t1")
    with pytest.raises(ProcessError, match="ROUTING_FAILED"):
        list(run_subtask(plan, iter([_batch(["a"], route=route_values(1)[0] + 1)])))
