"""Placement's record: where a run's subtasks ran, read back by the next run of the same
application only, and nothing where a run was not placed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from flinkstate.connector.process.placement import LOCATIONS, location_properties, place, preferred


def _session(app: str | None) -> Any:
    return SimpleNamespace(_sc=None if app is None else SimpleNamespace(applicationId=app))


def test_a_run_prefers_where_the_same_application_ran_each_subtask() -> None:
    spark = _session("app-1")
    props = location_properties(spark, ["executor_h_1", "", "executor_h_0"])
    assert props == {LOCATIONS: "app-1 executor_h_1 - executor_h_0"}
    assert preferred(props, spark, 3) == ["executor_h_1", "", "executor_h_0"]


def test_another_application_or_parallelism_or_no_record_prefers_nothing() -> None:
    props = location_properties(_session("app-1"), ["executor_h_1", "executor_h_0"])
    assert preferred(props, _session("app-2"), 2) == ["", ""]
    assert preferred(props, _session("app-1"), 3) == ["", "", ""]
    assert preferred(props, _session(None), 2) == ["", ""]
    assert preferred({}, _session("app-1"), 2) == ["", ""]


def test_unplaced_runs_record_nothing() -> None:
    assert location_properties(_session("app-1"), ["", ""]) == {}
    assert location_properties(_session(None), ["executor_h_1"]) == {}


def test_a_local_session_is_not_placed(spark: Any) -> None:
    frame = spark.range(4).repartition(2)
    assert place(frame, ["executor_x_1", "executor_x_2"]) is frame
