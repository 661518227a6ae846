"""The two-input harness (no Spark): a KeyedCoProcessFunction against a plain-Python model,
keys shared across inputs by the one rule (namedtuples, unicode), shared timers and state,
snapshots and rescaling, bad use."""

from __future__ import annotations

import random
from collections import namedtuple
from collections.abc import Iterator
from typing import Any

import pytest
from coprocess_functions import TIMEOUT, OrderPayments, order_payments_model

from flinkstate.state import (
    InvalidArgumentError,
    KeyedCoProcessFunction,
    KeyedCoProcessFunctionHarness,
    KeyedProcessFunctionHarness,
    TimeDomain,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.keygroups.assignment import compute_operator_index_for_key_group

from process_functions import WordCount

Order = namedtuple("Order", "id amount")
Payment = namedtuple("Payment", "id paid")
Key = namedtuple("Key", "shop customer")
KEYS = ["a", "ß", "日本", "", "x y", "😀"]


def _events(seed: int, n: int) -> list[tuple[int, Any, int | None, int | None]]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        side = rnd.choice([1, 2])
        number = rnd.choice([None, 0, 5, 10, 25]) if side == 2 else rnd.choice([5, 10, 30])
        out.append((side, rnd.choice(KEYS), number, rnd.choice([None, i])))
    return out


def _feed(h: KeyedCoProcessFunctionHarness, events: list[tuple[int, Any, int | None, int | None]]) -> None:
    for side, key, number, ts in events:
        if side == 1:
            h.process_element1(Order(key, number), ts)
        else:
            h.process_element2(Payment(key, number), ts)


@pytest.mark.parametrize("seed", range(4))
def test_orders_and_payments_match_the_model(seed: int, make_backend: Any) -> None:
    events = _events(seed, 300)
    with KeyedCoProcessFunctionHarness(
        OrderPayments(), lambda o: o.id, lambda p: p.id, backend_factory=make_backend
    ) as h:
        _feed(h, events)
        h.end_input()
        assert sorted(h.get_output(), key=repr) == sorted(order_payments_model(events), key=repr)


def test_a_namedtuple_key_and_a_tuple_key_are_one_key() -> None:
    key_type = Types.ROW_NAMED(["shop", "customer"], [Types.STRING(), Types.LONG()])
    with KeyedCoProcessFunctionHarness(
        OrderPayments(), lambda o: Key(*o.id), lambda p: tuple(p.id), key_type=key_type
    ) as h:
        h.process_element1(Order(("ç", 1), 30))
        h.process_element2(Payment(("ç", 1), 10))
        h.process_element2(Payment(("ç", 2), 50))  # another customer: its own state
        assert h.extract_output() == []
        h.process_element2(Payment(["ç", 1], 20))
        assert h.extract_output() == [("('ç', 1)", "paid", 30, 30, 3, None)]


def test_timers_and_state_are_shared_by_both_inputs() -> None:
    with KeyedCoProcessFunctionHarness(OrderPayments(), lambda o: o.id, lambda p: p.id) as h:
        h.process_element1(Order("k", 10), 1_000)
        h.process_element2(Payment("k", 4), 1_050)
        assert h.timers() == [("k", 1_000 + TIMEOUT)]
        h.process_watermark(1_000 + TIMEOUT - 1)
        assert h.extract_output() == []
        h.process_watermark(1_000 + TIMEOUT)
        assert h.extract_output() == [("k", "unpaid", 10, 4, 2, 1_000 + TIMEOUT)]
        assert h.timers() == []
        h.process_element2(Payment("k", 10), 1_200)  # after the timeout: a new order's payment
        h.process_element1(Order("k", 10), 1_201)
        assert h.extract_output() == [("k", "paid", 10, 10, 4, 1_201)]
        assert h.timers() == []  # the paid order's timer was deleted


class Clocks(KeyedCoProcessFunction):
    """Registers a processing-time timer from input 1, an event-time one from input 2."""

    def open(self, runtime_context: Any) -> None:
        self.last = runtime_context.get_state(ValueStateDescriptor("last", Types.STRING()))

    def process_element1(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Iterator[Any]:
        self.last.update(f"1:{value}")
        ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 5)
        yield from ()

    def process_element2(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Iterator[Any]:
        self.last.update(f"2:{value}")
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 5)
        yield from ()

    def on_timer(self, timestamp: int, ctx: KeyedCoProcessFunction.OnTimerContext) -> Iterator[Any]:
        yield ctx.get_current_key(), ctx.time_domain(), timestamp, self.last.value()


def test_processing_time_and_event_time_timers_with_watermark_delay() -> None:
    with KeyedCoProcessFunctionHarness(
        Clocks(), lambda v: v[0], lambda v: v[0], processing_time=100, watermark_delay=2
    ) as h:
        h.process_element1("a1")
        h.process_element2("a2", 10)
        h.process_element2("b2", 20)  # moves the watermark to 17: a's event timer (15) fires
        assert h.extract_output() == [("a", TimeDomain.EVENT_TIME, 15, "2:a2")]
        h.set_processing_time(105)
        assert h.extract_output() == [("a", TimeDomain.PROCESSING_TIME, 105, "2:a2")]
        h.end_input()
        assert h.extract_output() == [("b", TimeDomain.EVENT_TIME, 25, "2:b2")]


def test_a_snapshot_restores_into_more_subtasks() -> None:
    events = _events(7, 200)
    with KeyedCoProcessFunctionHarness(OrderPayments(), lambda o: o.id, lambda p: p.id) as h:
        _feed(h, events[:100])
        snap = h.snapshot()
        first = h.get_output()
    out = list(first)
    for subtask in range(3):
        with KeyedCoProcessFunctionHarness(
            OrderPayments(), lambda o: o.id, lambda p: p.id, parallelism=3, subtask=subtask, restore_from=snap
        ) as h:
            mine = [
                e
                for e in events[100:]
                if compute_operator_index_for_key_group(128, 3, assign_to_key_group(e[1], 128)) == subtask
            ]
            _feed(h, mine)
            h.end_input()
            out += h.get_output()
    assert sorted(out, key=repr) == sorted(order_payments_model(events), key=repr)


def test_bad_use_is_a_typed_error() -> None:
    with pytest.raises(InvalidArgumentError, match="INVALID_FUNCTION"):
        KeyedCoProcessFunctionHarness(WordCount(), lambda v: v, lambda v: v)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="key_selector2 must be callable"):
        KeyedCoProcessFunctionHarness(OrderPayments(), lambda v: v, "id")  # type: ignore[arg-type]
    with (
        KeyedCoProcessFunctionHarness(OrderPayments(), lambda o: o.id, lambda p: p.id) as h,
        pytest.raises(InvalidArgumentError, match=r"INVALID_FUNCTION.*input 1 or 2"),
    ):
        h.process_element(Order("a", 1))
    with (
        KeyedProcessFunctionHarness(OrderPayments(), lambda o: o.id) as h1,
        pytest.raises(InvalidArgumentError, match="INVALID_FUNCTION"),
    ):
        h1.process_element(Order("a", 1))


def test_float_keys_are_the_same_across_inputs_by_their_bits() -> None:
    import struct

    other_nan = struct.unpack(">d", b"\x7f\xf8\x00\x00\x00\x00\x00\x01")[0]  # another payload
    with KeyedCoProcessFunctionHarness(OrderPayments(), lambda o: o.id, lambda p: p.id) as h:
        h.process_element1(Order(float("nan"), 10))
        h.process_element1(Order(-0.0, 10))
        h.process_element2(Payment(0.0, 10))  # 0.0 is not -0.0: no order of its own
        assert h.extract_output() == []
        h.process_element2(Payment(-other_nan, 10))  # every NaN is one key
        h.process_element2(Payment(-0.0, 10))
        assert h.extract_output() == [("nan", "paid", 10, 10, 2, None), ("-0.0", "paid", 10, 10, 2, None)]
