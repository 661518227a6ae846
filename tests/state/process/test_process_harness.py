"""The process-function harness (no Spark): functions against plain-Python models,
timers (order, uniqueness, deletion), TTL, broadcast state, snapshots and rescaling."""

from __future__ import annotations

import random
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from flinkstate.state import (
    KeyedBroadcastProcessFunctionHarness,
    KeyedProcessFunction,
    KeyedProcessFunctionHarness,
    ProcessFunctionError,
    TimeDomain,
    assign_to_key_group,
)
from flinkstate.state.errors import StateAccessError, StateTypeError
from flinkstate.state.keygroups.assignment import compute_operator_index_for_key_group
from flinkstate.state.process import TIMER_STATES

from process_functions import (
    GAP,
    RULES,
    SESSION,
    Failing,
    Reminder,
    Sessions,
    ThresholdAlerts,
    Totals,
    WordCount,
    sessions_model,
    totals_model,
    word_count_model,
)


def first(value: Any) -> Any:
    return value[0]


def test_word_count_against_model() -> None:
    rnd = random.Random(3)
    words = [rnd.choice(["a", "b", "ç", "日本", ""]) for _ in range(500)]
    with KeyedProcessFunctionHarness(WordCount(), lambda w: w) as h:
        for w in words:
            h.process_element(w)
        out = h.get_output()
    assert len(out) == len(words)
    final: dict[str, int] = {}
    for word, n in out:
        final[word] = n
    assert final == word_count_model(words)


def test_sessions_with_event_time_timers_and_ttl() -> None:
    rnd = random.Random(5)
    events = [(rnd.choice("xyz"), t * 7 + rnd.randrange(5)) for t in range(300)]
    with KeyedProcessFunctionHarness(Sessions(), first, watermark_delay=5) as h:
        for user, ts in events:  # in event-time order: the watermark follows them
            h.process_element((user, ts), ts)
            assert h.current_watermark() == ts - 5 - 1
        h.process_watermark(events[-1][1])
        h.end_input()
        assert h.timers() == []
        h.process_element(("late", 10), 10)  # late: the watermark stays
        assert h.current_watermark() == events[-1][1]
    assert sorted(h.get_output()) == sessions_model(events)


def test_sessions_in_one_batch_with_a_fixed_watermark() -> None:
    """Without watermark progress the session function still closes gaps itself."""
    rnd = random.Random(6)
    events = [(rnd.choice("xyz"), t * 7 + rnd.randrange(5)) for t in range(300)]
    with KeyedProcessFunctionHarness(Sessions(), first) as h:
        h.process_watermark(0)
        for user, ts in events:
            h.process_element((user, ts), ts)
        h.end_input()
        assert sorted(h.get_output()) == sessions_model(events)


def test_event_time_ttl_drops_an_idle_session() -> None:
    with KeyedProcessFunctionHarness(Sessions(), first) as h:
        h.process_watermark(50)
        h.process_element(("u", 100), 100)
        h.backend.set_current_key("u")
        h.operator.event_timers.delete(100 + GAP)  # no timer: the session is left to TTL
        session = h.backend.get_state(SESSION)
        h.process_watermark(50 + 10 * GAP - 1)  # stamped at the watermark of the write
        assert session.value() == (100, 100, 1)
        h.process_watermark(50 + 10 * GAP)
        assert session.value() is None
        assert h.get_output() == []


class TimerLog(KeyedProcessFunction):
    """Registers/deletes timers as elements say; logs (key, timestamp, watermark) on fire."""

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        op, ts = value[1], value[2]
        timers = ctx.timer_service()
        if op == "add":
            timers.register_event_time_timer(ts)
        elif op == "del":
            timers.delete_event_time_timer(ts)
        elif op == "chain":
            timers.register_event_time_timer(ts)
        yield from ()

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        assert ctx.timestamp() == timestamp
        yield ctx.get_current_key(), timestamp
        if timestamp % 2 == 1:  # a timer registered while firing, due at once
            ctx.timer_service().register_event_time_timer(timestamp + 1)


def test_timers_fire_in_time_order_once_and_deleted_ones_never() -> None:
    rnd = random.Random(11)
    live: set[tuple[str, int]] = set()
    with KeyedProcessFunctionHarness(TimerLog(), first) as h:
        for _ in range(400):
            key, ts = rnd.choice("abcdef"), rnd.randrange(0, 200) * 2
            op = rnd.choice(["add", "add", "del"])
            h.process_element((key, op, ts))
            if op == "add":
                live.add((key, ts))
            else:
                live.discard((key, ts))
        assert sorted(h.timers(), key=lambda p: (p[1], p[0])) == sorted(live, key=lambda p: (p[1], p[0]))
        h.process_watermark(199)
        fired = h.extract_output()
        assert [t for _, t in fired] == sorted(t for _, t in fired)
        assert sorted(fired) == sorted(p for p in live if p[1] <= 199)
        h.process_element(("z", "add", 301))
        h.process_watermark(302)
        middle = h.extract_output()
        assert middle[-2:] == [("z", 301), ("z", 302)]  # 302: registered while firing 301
        h.process_watermark(10_000)
        rest = middle[:-2] + h.extract_output()
        assert sorted(rest) == sorted(p for p in live if p[1] > 199)


def test_processing_time_timers_follow_the_clock() -> None:
    with KeyedProcessFunctionHarness(Reminder(delay=100), lambda v: v, processing_time=1_000) as h:
        h.process_element("a")
        h.set_processing_time(1_050)
        h.process_element("b")
        h.process_element("a")
        assert h.timers(TimeDomain.PROCESSING_TIME) == [("a", 1_100), ("b", 1_150)]
        h.set_processing_time(1_099)
        assert h.get_output() == []
        h.set_processing_time(1_100)
        assert h.extract_output() == [("a", 1_100)]
        h.process_watermark(1 << 40)  # event time does not fire processing-time timers
        h.end_input()
        assert h.extract_output() == []
        h.set_processing_time(5_000)
        assert h.extract_output() == [("b", 1_150)]


def test_broadcast_rules() -> None:
    with KeyedBroadcastProcessFunctionHarness(ThresholdAlerts(), lambda w: w) as h:
        for w in ["a", "a", "b"]:
            h.process_element(w)
        h.process_broadcast_element(("a", 2))  # resets every count
        for w in ["a", "b", "a", "a"]:
            h.process_element(w)
        assert h.get_output() == [("a", 2)]
        snap = h.snapshot()
    restored = KeyedBroadcastProcessFunctionHarness(ThresholdAlerts(), lambda w: w, restore_from=snap)
    assert dict(restored.operator.operator_state.get_broadcast_state(RULES).items()) == {"a": 2}
    restored.process_element("b")
    restored.process_broadcast_element(("b", 1))
    restored.process_element("b")
    assert restored.get_output() == [("b", 1)]


def test_broadcast_state_is_read_only_for_elements() -> None:
    class Writer(ThresholdAlerts):
        def process_element(self, value: Any, ctx: Any) -> Iterator[Any]:
            ctx.get_broadcast_state(RULES).put("x", 1)
            yield from ()

    with (
        KeyedBroadcastProcessFunctionHarness(Writer(), lambda w: w) as h,
        pytest.raises(ProcessFunctionError, match="'w'") as info,
    ):
        h.process_element("w")
    assert isinstance(info.value.__cause__, AttributeError)


def test_timers_need_a_key_in_broadcast_elements() -> None:
    class Bad(ThresholdAlerts):
        def process_broadcast_element(self, value: Any, ctx: Any) -> Iterator[Any]:
            ctx.timer_service().register_event_time_timer(1)
            yield from ()

    with KeyedBroadcastProcessFunctionHarness(Bad(), lambda w: w) as h, pytest.raises(ProcessFunctionError):
        h.process_broadcast_element(("a", 1))


def test_failures_name_key_and_subtask() -> None:
    with KeyedProcessFunctionHarness(Failing(), lambda w: w) as h:
        h.process_element("fine")
        with pytest.raises(
            ProcessFunctionError, match=r"PROCESS_FUNCTION_FAILED.*'boom'.*subtask 0 of 1"
        ) as e:
            h.process_element("boom")
        assert isinstance(e.value.__cause__, ValueError)


def test_bad_timer_times() -> None:
    with KeyedProcessFunctionHarness(TimerLog(), first) as h:
        with pytest.raises(ProcessFunctionError) as e:
            h.process_element(("a", "add", 1.5))
        assert isinstance(e.value.__cause__, StateTypeError)
    with (
        KeyedProcessFunctionHarness(TimerLog(), first) as fresh,
        pytest.raises(StateAccessError, match="NO_CURRENT_KEY"),
    ):
        fresh.operator.event_timers.register(5)


def test_snapshot_restore_and_rescale_of_timers() -> None:
    rnd = random.Random(2)
    keys = [f"k{i}" for i in range(60)]
    with KeyedProcessFunctionHarness(TimerLog(), first) as h:
        for k in keys:
            for _ in range(3):
                h.process_element((k, "add", rnd.randrange(100) * 2))
        timers = sorted(h.timers())
        snap = h.snapshot()
        assert set(snap.keyed) == {TIMER_STATES[TimeDomain.EVENT_TIME]}
    parts = [KeyedProcessFunctionHarness(TimerLog(), first, parallelism=3, subtask=i, restore_from=snap)
             for i in range(3)]  # fmt: skip
    for i, part in enumerate(parts):
        assert all(assign_to_key_group(k, 128) in part.backend.key_group_range for k, _ in part.timers())
        assert part.operator.subtask == i
    assert sorted(t for p in parts for t in p.timers()) == timers
    back = KeyedProcessFunctionHarness(TimerLog(), first, restore_from=[p.snapshot() for p in parts])
    assert sorted(back.timers()) == timers
    back.end_input()
    fired = back.get_output()
    assert sorted(fired) == timers and [t for _, t in fired] == sorted(t for _, t in timers)


def test_reducing_and_aggregating_state_and_the_subtask_a_function_sees() -> None:
    from collections import namedtuple

    value = namedtuple("value", "k v")
    owner = partial(compute_operator_index_for_key_group, 128, 3)
    keys = [k for k in (f"k{i}" for i in range(60)) if owner(assign_to_key_group(k, 128)) == 1][:4]
    rnd = random.Random(11)
    rows = [(rnd.choice(keys), rnd.randrange(-50, 50)) for _ in range(200)]
    with KeyedProcessFunctionHarness(Totals(), lambda v: v.k, parallelism=3, subtask=1) as h:
        for k, v in rows:
            h.process_element(value(k, v))
        out, snap = h.get_output(), h.snapshot()
    assert [r[:3] for r in out] == totals_model(rows)
    assert {r[3:] for r in out} == {(1, 3)}
    # restored at parallelism 1: both states go on, the function sees its new place
    with KeyedProcessFunctionHarness(Totals(), lambda v: v.k, restore_from=snap) as h:
        h.process_element(value(keys[0], 1000))
        assert h.get_output() == [(*totals_model([*rows, (keys[0], 1000)])[-1], 0, 1)]
