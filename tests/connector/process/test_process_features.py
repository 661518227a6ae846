"""Function features through the Spark runner: processing-time timers, the order of
event-time ties, reducing and aggregating state, the subtask a function sees, and its
task name and job parameters."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from flinkstate.connector import ProcessError, process
from flinkstate.state import assign_to_key_group
from flinkstate.state.keygroups.assignment import compute_operator_index_for_key_group

import process_functions
from process_functions import Arrivals, Reminder, TaskInfo, Totals, totals_model


@pytest.fixture(autouse=True, scope="module")
def _functions_by_value() -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(process_functions)


def _timers(spark: Any, root: Path) -> list[Any]:
    view = spark.read.format("flinkstate").option("operator", "r").option("timers", "true").load(str(root))
    return sorted((r.key, r.time_domain, r.timestamp) for r in view.collect())


@pytest.mark.connect
def test_processing_time_timers_fire_once_the_wall_clock_passed_them(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([("a",), ("b",), ("a",)], "word string")
    schema = "word string, at bigint"
    start = int(time.time() * 1000)
    now = process(df, "word", Reminder(0), schema, str(tmp_path / "now"), "r", parallelism=2).collect()
    done = int(time.time() * 1000)  # a timer at the element's now is due at the end of its run
    assert sorted(r.word for r in now) == ["a", "b"] and all(start <= r.at <= done for r in now)
    assert _timers(spark, tmp_path / "now") == []
    delay = 4000
    root = str(tmp_path / "later")
    start = int(time.time() * 1000)
    assert process(df, "word", Reminder(delay), schema, root, "r", parallelism=2).collect() == []
    pending = _timers(spark, tmp_path / "later")
    assert [(k, d) for k, d, _ in pending] == [("a", "PROCESSING_TIME"), ("b", "PROCESSING_TIME")]
    assert all(start + delay <= t <= int(time.time() * 1000) + delay for *_, t in pending)
    none = spark.createDataFrame([], "word string")
    time.sleep(max(0.0, (max(t for *_, t in pending) - time.time() * 1000) / 1000 + 0.05))
    fired = process(none, "word", Reminder(delay), schema, root, "r", parallelism=3).collect()
    assert sorted(map(tuple, fired)) == [(k, t) for k, _, t in pending]  # after a rescale too
    assert _timers(spark, tmp_path / "later") == []


@pytest.mark.connect
def test_event_time_ties_keep_the_input_order(spark: Any, tmp_path: Path) -> None:
    rnd = random.Random(4)
    rows = [(rnd.choice("pqrst"), rnd.randrange(4), i) for i in range(300)]  # many ties
    df = spark.createDataFrame(rows, "k string, ts bigint, i int").coalesce(1)  # one partition, in order
    out = process(df, "k", Arrivals(), "k string, i int, n bigint", str(tmp_path / "c"), "o",
                  event_time="ts", parallelism=2).collect()  # fmt: skip
    by_key: dict[str, list[tuple[int, int]]] = {}
    for k, i, n in out:
        by_key.setdefault(k, []).append((n, i))
    stable = sorted(rows, key=lambda r: r[1])  # Python's sort is stable: ties in input order
    assert {k: [i for _, i in sorted(v)] for k, v in by_key.items()} == {
        k: [i for kk, _, i in stable if kk == k] for k in by_key
    }
    assert set(by_key) == set("pqrst")


def test_reducing_and_aggregating_state_and_the_subtask(spark: Any, tmp_path: Path) -> None:
    rnd = random.Random(6)
    rows = [(f"k{rnd.randrange(12)}", rnd.randrange(-100, 100)) for _ in range(400)]
    df = spark.createDataFrame(rows, "k string, v bigint").coalesce(1)
    schema = "k string, largest bigint, mean double, subtask int, subtasks int"
    out = process(df, "k", Totals(), schema, str(tmp_path / "c"), "t", parallelism=3).collect()
    model = totals_model(rows)
    assert sorted(tuple(r)[:3] for r in out) == sorted(model)
    owner = {k: compute_operator_index_for_key_group(128, 3, assign_to_key_group(k, 128)) for k, _ in rows}
    assert {(r.k, r.subtask, r.subtasks) for r in out} == {(k, owner[k], 3) for k in owner}
    assert len(set(owner.values())) == 3
    more = [("k1", 1000)]
    again = process(spark.createDataFrame(more, "k string, v bigint"), "k", Totals(), schema,
                    str(tmp_path / "c"), "t", parallelism=1).collect()  # fmt: skip
    assert [tuple(r) for r in again] == [(*totals_model(rows + more)[-1], 0, 1)]


def test_task_name_is_the_uid_and_job_parameters_reach_the_function(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([(f"k{i}",) for i in range(8)], "k string")
    schema = "k string, task string, env string"
    root = str(tmp_path / "c")
    out = process(df, "k", TaskInfo(), schema, root, "tasks", parallelism=2, job_parameters={"env": "prod"})
    owner = {
        f"k{i}": compute_operator_index_for_key_group(128, 2, assign_to_key_group(f"k{i}", 128))
        for i in range(8)
    }
    assert sorted(map(tuple, out.collect())) == sorted(
        (k, f"tasks ({o + 1}/2)#0", "prod") for k, o in owner.items()
    )
    with pytest.raises(ProcessError, match=r"\[INVALID_PROCESS_ARGUMENT\].*job_parameters"):
        process(df, "k", TaskInfo(), schema, root, "tasks", job_parameters={"env": 1})
