"""Side outputs in the harness: PyFlink's ``OutputTag`` and ``yield tag, value``, against a
plain-Python model; the split rule and its typed errors."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from side_functions import LONG_WORDS, MILESTONES, Milestones, milestones_model

from flinkstate.state import (
    InvalidArgumentError,
    KeyedProcessFunction,
    KeyedProcessFunctionHarness,
    OutputTag,
    StateTypeError,
    TimeDomain,
    Types,
)
from flinkstate.state.process.side_outputs import split_side_outputs
from flinkstate.state.types.typeinfo import PickledBytesTypeInfo, RowTypeInfo

WORDS = ["straße", "ok", "日本語テキスト", "ok", "straße", "ok", "ok", "straße", "straße", "🍕ünï"]


def test_harness_collects_each_side_output_as_the_model() -> None:
    main, side = milestones_model(WORDS)
    with KeyedProcessFunctionHarness(Milestones(), lambda w: w) as h:
        for w in WORDS:
            h.process_element(w)
        assert h.get_output() == main
        assert h.get_side_output(LONG_WORDS) == side[LONG_WORDS.tag_id]
        assert h.get_side_output(MILESTONES) == side[MILESTONES.tag_id]
        assert h.get_side_output("milestones") == side[MILESTONES.tag_id]  # by id too
        assert h.get_side_output(OutputTag("never")) == []
        assert None in [note for *_, note in h.get_side_output(MILESTONES)]  # nulls travel


def test_side_outputs_continue_across_a_restore() -> None:
    first, second = WORDS[:5], WORDS[5:]
    with KeyedProcessFunctionHarness(Milestones(), lambda w: w) as h:
        for w in first:
            h.process_element(w)
        snap = h.snapshot()
    counts = {w: n for w, n in milestones_model(first)[0]}
    _, side = milestones_model(second, counts)
    with KeyedProcessFunctionHarness(Milestones(), lambda w: w, restore_from=snap) as h:
        for w in second:
            h.process_element(w)
        assert h.get_side_output(MILESTONES) == side[MILESTONES.tag_id]


class LateTimers(KeyedProcessFunction):
    """Elements behind the watermark go to a side output; a timer yields to another."""

    LATE = OutputTag("late", [Types.STRING(), Types.LONG()])
    FIRED = OutputTag("fired", Types.LONG())

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:
        ts = ctx.timestamp()
        assert ts is not None
        if ts <= ctx.timer_service().current_watermark():
            yield self.LATE, (value[0], ts)
            return
        ctx.timer_service().register_event_time_timer(ts + 10)
        yield value

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Any:
        assert ctx.time_domain() is TimeDomain.EVENT_TIME
        yield self.FIRED, timestamp


def test_timers_and_late_elements_yield_to_side_outputs() -> None:
    with KeyedProcessFunctionHarness(LateTimers(), lambda v: v[0]) as h:
        h.process_element(("a", 1), 5)
        h.process_watermark(20)
        h.process_element(("a", 2), 7)
        h.process_element(("b", 3), 30)
        h.end_input()
        assert h.get_output() == [("a", 1), ("b", 3)]
        assert h.get_side_output(LateTimers.LATE) == [("a", 7)]
        assert h.get_side_output(LateTimers.FIRED) == [15, 40]


def test_output_tag_has_pyflinks_signature_and_rules() -> None:
    assert isinstance(OutputTag("side").type_info, PickledBytesTypeInfo)
    row = OutputTag("row", [Types.STRING(), Types.LONG()]).type_info
    assert isinstance(row, RowTypeInfo) and row.field_names == ("f0", "f1")
    assert OutputTag("x", Types.LONG()) == OutputTag("x", Types.STRING())  # Flink: equal by id
    assert len({OutputTag("x"), OutputTag("x"), OutputTag("y")}) == 2
    tag = pickle.loads(pickle.dumps(MILESTONES))
    assert tag == MILESTONES and tag.type_info == MILESTONES.type_info
    with pytest.raises(ValueError, match=r"\[SIDE_OUTPUT_INVALID\]"):
        OutputTag("")
    with pytest.raises(InvalidArgumentError, match=r"\[SIDE_OUTPUT_INVALID\]"):
        OutputTag(None)  # type: ignore[arg-type]
    with pytest.raises(StateTypeError, match=r"\[SIDE_OUTPUT_INVALID\].*type_info"):
        OutputTag("x", "STRING")
    with pytest.raises(TypeError):
        OutputTag("x", 3)


def test_split_keeps_rows_and_checks_tags() -> None:
    tag = OutputTag("t", Types.STRING())
    items: list[Any] = [("a", 1), (tag, "x"), (None,), (tag, None), ["list", tag], ("t", "not a tag")]
    side: dict[str, list[Any]] = {}
    assert split_side_outputs(items, side) == [("a", 1), (None,), ["list", tag], ("t", "not a tag")]
    assert side == {"t": ["x", None]}
    assert split_side_outputs(items, {}, known={"t"}) == [
        ("a", 1),
        (None,),
        ["list", tag],
        ("t", "not a tag"),
    ]
    with pytest.raises(InvalidArgumentError, match=r"\[SIDE_OUTPUT_UNKNOWN_TAG\].*'t'.*\['other'\]"):
        split_side_outputs(items, {}, known={"other"})
    with pytest.raises(InvalidArgumentError, match=r"\[SIDE_OUTPUT_INVALID\].*3 items"):
        split_side_outputs([(tag, 1, 2)], {})
