"""The Spark runner across runs: where the input is split into runs, concurrent runs on one
root, restarted streaming queries, broadcast elements applied once per query."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.connector import process

import process_functions
from process_functions import Sessions, sessions_model

SESSIONS = "user string, start bigint, end bigint, events bigint"


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
