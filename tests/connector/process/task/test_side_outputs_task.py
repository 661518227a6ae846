"""Side outputs in a task, without a SparkSession: written with the main output as one
operator's states (so committed together), one attempt's rows only, typed errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from side_functions import LONG_WORDS, MILESTONES, Milestones, YieldsTo, milestones_model
from test_process_task import _commit, _plan, _run

from flinkstate.connector import ProcessError
from flinkstate.connector.process.names import OUTPUT_STATE, output_uid, side_state
from flinkstate.connector.process.side_outputs import parse_side_outputs
from flinkstate.connector.process.task.live import _KEPT, forget_kept
from flinkstate.state import OutputTag, Types

WORDS = ["straße", "ok", "日本語テキスト", "ok", "straße", "ok", "ok", "straße", "straße"]


def _side_plan(root: Path, function: Any, token: str, tags: list[OutputTag], base: Any = None) -> Any:
    plan, pending = _plan(root, function, token, base)
    return dataclasses.replace(plan, side_outputs=parse_side_outputs(None, tags)), pending


def _committed(checkpoint: Any) -> dict[str, list[Any]]:
    (states,) = checkpoint.operator_states(output_uid("wc"))
    return {s.name: [tuple(r) for r in s.elements] for s in states}


def test_side_outputs_commit_with_the_output_from_one_attempt(tmp_path: Path) -> None:
    forget_kept()
    plan, pending = _side_plan(tmp_path, Milestones(), "t1", [LONG_WORDS, MILESTONES])
    _run(plan, WORDS)  # an attempt whose results the driver does not commit (a lost copy)
    forget_kept()
    results, stats = _run(plan, WORDS)  # the retry
    main, side = milestones_model(WORDS)
    assert stats["side_output"] == {k: len(v) for k, v in side.items()}
    got = _committed(_commit(pending, results))
    assert got == {
        OUTPUT_STATE: main,
        side_state(LONG_WORDS.tag_id): [(w,) for w in side[LONG_WORDS.tag_id]],
        side_state(MILESTONES.tag_id): side[MILESTONES.tag_id],
    }
    forget_kept()


def test_a_declared_side_output_without_rows_is_committed_empty(tmp_path: Path) -> None:
    plan, pending = _side_plan(tmp_path, Milestones(), "t1", [LONG_WORDS, MILESTONES])
    results, _ = _run(plan, ["ok"])
    got = _committed(_commit(pending, results))
    assert got[side_state(LONG_WORDS.tag_id)] == [] and got[side_state(MILESTONES.tag_id)] == []
    forget_kept()


@pytest.mark.parametrize(
    ("tags", "function", "match"),
    [
        ([], YieldsTo(LONG_WORDS, "x"), r"\[SIDE_OUTPUT_UNKNOWN_TAG\].*'long wörds'"),
        ([LONG_WORDS], YieldsTo(MILESTONES, ("w", 1, None)), r"\[SIDE_OUTPUT_UNKNOWN_TAG\].*'milestones'"),
        ([MILESTONES], YieldsTo(MILESTONES, ("w", "one", None)), r"\[SIDE_OUTPUT_SCHEMA_MISMATCH\].*'count'"),
        (
            [MILESTONES],
            YieldsTo(MILESTONES, ("w", 1)),
            r"\[SIDE_OUTPUT_SCHEMA_MISMATCH\].*2 values.*3 columns",
        ),
        (
            [MILESTONES],
            YieldsTo(MILESTONES, {"word": "w"}),
            r"\[SIDE_OUTPUT_SCHEMA_MISMATCH\].*missing.*'count'",
        ),
        ([LONG_WORDS], YieldsTo(LONG_WORDS, float("nan")), r"\[SIDE_OUTPUT_SCHEMA_MISMATCH\].*'value'"),
    ],
)
def test_bad_side_outputs_are_typed_errors(
    tmp_path: Path, tags: list[Any], function: Any, match: str
) -> None:
    plan, _ = _side_plan(tmp_path, function, "t1", tags)
    with pytest.raises(ProcessError, match=match):
        _run(plan, ["a", "b"])
    assert not _KEPT


def test_side_output_schemas_from_tags() -> None:
    long_words, milestones = parse_side_outputs(None, [LONG_WORDS, MILESTONES])
    assert (long_words.atomic, long_words.schema.names) == (True, ["value"])
    assert (milestones.atomic, milestones.schema.names) == (False, ["word", "count", "note"])
    (declared,) = parse_side_outputs(None, {OutputTag("pickled"): _struct("a")})
    assert (declared.tag_id, declared.atomic, declared.schema.names) == ("pickled", False, ["a"])
    (renamed,) = parse_side_outputs(None, {OutputTag("n", Types.LONG()): _struct("n")})
    assert renamed.atomic and renamed.rows([1, None]) == [(1,), (None,)]
    with pytest.raises(ProcessError, match=r"\[SIDE_OUTPUT_INVALID\].*one column, not 2"):
        parse_side_outputs(None, {OutputTag("n", Types.LONG()): _struct("n", "m")})
    with pytest.raises(ProcessError, match=r"\[SIDE_OUTPUT_NO_SCHEMA\].*'pickled'"):
        parse_side_outputs(None, [OutputTag("pickled")])
    with pytest.raises(ProcessError, match=r"\[SIDE_OUTPUT_INVALID\].*twice"):
        parse_side_outputs(None, [LONG_WORDS, OutputTag(LONG_WORDS.tag_id, Types.LONG())])
    with pytest.raises(ProcessError, match=r"\[SIDE_OUTPUT_INVALID\]"):
        parse_side_outputs(None, {"by id": None})


def _struct(*names: str) -> Any:
    from pyspark.sql.types import LongType, StructField, StructType

    return StructType([StructField(n, LongType()) for n in names])
