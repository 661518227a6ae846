"""Scenarios of PyFlink's ``flink-python/pyflink/datastream/tests/test_data_stream.py``
that use state, restated in our own code and run on our harness, expecting the results
PyFlink's tests expect (its sorted sink output).

(PyFlink's own examples: ``test_pyflink_examples.py``.)
"""

from __future__ import annotations

from collections import defaultdict, namedtuple
from collections.abc import Iterator
from typing import Any

import pytest

from flinkstate.state import (
    AggregateFunction,
    AggregatingStateDescriptor,
    KeyedBroadcastProcessFunction,
    KeyedBroadcastProcessFunctionHarness,
    KeyedProcessFunction,
    KeyedProcessFunctionHarness,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    RuntimeContext,
    StateTtlConfig,
    Time,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_operator_index_for_key_group,
)


def subtask_of(key: Any, parallelism: int = 2) -> int:
    return compute_operator_index_for_key_group(128, parallelism, assign_to_key_group(key, 128))


Row = namedtuple("Row", ["f0", "f1", "f2"])  # repr as PyFlink's Row: Row(f0=1, f1='hi', ...)


class AllStates(KeyedProcessFunction):
    """Value, list and map state (the map with TTL), described per element as PyFlink's
    ``test_keyed_process_function_with_state`` does."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.value_state = runtime_context.get_state(ValueStateDescriptor("value_state", Types.INT()))
        self.list_state = runtime_context.get_list_state(ListStateDescriptor("list_state", Types.INT()))
        desc = MapStateDescriptor("map_state", Types.INT(), Types.STRING())
        ttl = (
            StateTtlConfig.new_builder(Time.seconds(1))
            .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
            .set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
            .disable_cleanup_in_background()
            .build()
        )
        desc.enable_time_to_live(ttl)
        self.map_state = runtime_context.get_map_state(desc)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        before, listed = self.value_state.value(), list(self.list_state)
        entries = ", ".join(f"{k}: {v}" for k, v in sorted(self.map_state.items()))
        self.value_state.update(value[0])
        self.list_state.add(value[0])
        self.map_state[value[0]] = value[1]
        yield (
            f"current key: {ctx.get_current_key()}, current value state: {before}, current list state: "
            f"{listed}, current map state: {{{entries}}}, current value: {value}"
        )


def test_keyed_process_function_with_state(make_backend: Any) -> None:
    rows = [Row(1, "hi", "1603708211000"), Row(2, "hello", "1603708224000"),
            Row(3, "hi", "1603708226000"), Row(4, "hello", "1603708289000"),
            Row(5, "hi", "1603708291000"), Row(6, "hello", "1603708293000")]  # fmt: skip
    with KeyedProcessFunctionHarness(AllStates(), lambda x: x[1], backend_factory=make_backend) as h:
        for row in rows:
            h.process_element(row, timestamp=int(row[2]))
        out = h.get_output()
    assert sorted(out) == sorted([  # PyFlink's expected output
        "current key: hi, current value state: None, current list state: [], current map state: {}, "
        "current value: Row(f0=1, f1='hi', f2='1603708211000')",
        "current key: hello, current value state: None, current list state: [], current map state: {}, "
        "current value: Row(f0=2, f1='hello', f2='1603708224000')",
        "current key: hi, current value state: 1, current list state: [1], current map state: {1: hi}, "
        "current value: Row(f0=3, f1='hi', f2='1603708226000')",
        "current key: hello, current value state: 2, current list state: [2], current map state: "
        "{2: hello}, current value: Row(f0=4, f1='hello', f2='1603708289000')",
        "current key: hi, current value state: 3, current list state: [1, 3], current map state: "
        "{1: hi, 3: hi}, current value: Row(f0=5, f1='hi', f2='1603708291000')",
        "current key: hello, current value state: 4, current list state: [2, 4], current map state: "
        "{2: hello, 4: hello}, current value: Row(f0=6, f1='hello', f2='1603708293000')",
    ])  # fmt: skip


class Plus(AggregateFunction):
    def create_accumulator(self) -> int:
        return 0

    def add(self, value: int, accumulator: int) -> int:
        return value + accumulator

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, acc_a: int, acc_b: int) -> int:
        return acc_a + acc_b


class RunningTotal(KeyedProcessFunction):
    """(running total of a key's first field, the key) with reducing or aggregating state
    (PyFlink's ``test_reducing_state`` and ``test_aggregating_state``, the latter with TTL)."""

    def __init__(self, aggregating: bool) -> None:
        self.aggregating = aggregating

    def open(self, runtime_context: RuntimeContext) -> None:
        if self.aggregating:
            desc = AggregatingStateDescriptor("aggregating_state", Plus(), Types.INT())
            desc.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(1)).build())
            self.state: Any = runtime_context.get_aggregating_state(desc)
        else:
            reduce = ReducingStateDescriptor("reducing_state", lambda i, i2: i + i2, Types.INT())
            self.state = runtime_context.get_reducing_state(reduce)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        self.state.add(value[0])
        yield self.state.get(), value[1]


@pytest.mark.parametrize("aggregating", [False, True])
def test_reducing_and_aggregating_state(make_backend: Any, aggregating: bool) -> None:
    data = [(1, "hi"), (2, "hello"), (3, "hi"), (4, "hello"), (5, "hi"), (6, "hello")]
    outputs = []
    for subtask in (0, 1):  # at parallelism 2, as PyFlink's tests run them
        function = RunningTotal(aggregating)
        with KeyedProcessFunctionHarness(
            function, lambda x: x[1], parallelism=2, subtask=subtask, backend_factory=make_backend
        ) as h:
            for value in data:
                if subtask_of(value[1]) == subtask:
                    h.process_element(value)
            outputs += h.get_output()
    expected = ["(1,hi)", "(2,hello)", "(4,hi)", "(6,hello)", "(9,hi)", "(12,hello)"]  # PyFlink's
    assert sorted(f"({n},{k})" for n, k in outputs) == sorted(expected)


MAPPING = MapStateDescriptor("mapping", key_type_info=Types.INT(), value_type_info=Types.STRING())


class ParityNames(KeyedBroadcastProcessFunction):
    """Broadcast (parity, name) pairs name each keyed element by its parity; elements that
    come before their name wait in a cache; each element sets a timer 10 s after it
    (PyFlink's ``test_keyed_co_broadcast_process``)."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.cache: dict[int, list[Any]] = defaultdict(list)

    def process_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        names = ctx.get_broadcast_state(MAPPING)
        parity = value[0] % 2
        if parity in names:
            for waiting in self.cache.pop(parity, []):
                yield f"value: {names[parity]}{waiting[0]}, ts: {waiting[1]}"
            yield f"value: {names[parity]}{value[0]}, ts: {value[1]}"
        else:
            self.cache[parity].append(value)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10000)

    def process_broadcast_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        yield f"value: {value[0]}{value[2]}, ts: {ctx.timestamp()}"
        ctx.get_broadcast_state(MAPPING).put(value[0], value[2])
        for waiting in self.cache.pop(value[0], []):
            yield f"value: {value[2]}{waiting[0]}, ts: {waiting[1]}"

    def on_timer(self, timestamp: int, ctx: KeyedBroadcastProcessFunction.OnTimerContext) -> Iterator[Any]:
        yield f"value: {ctx.get_current_key()}, ts: {timestamp}"


def test_keyed_broadcast_process_function_at_parallelism_2() -> None:
    keyed = [(1, "1603708211000"), (2, "1603708212000"), (3, "1603708213000"), (4, "1603708214000")]
    broadcast = [(0, "1603708215000", "a"), (1, "1603708215000", "b")]
    out = []
    for subtask in (0, 1):  # every subtask gets every broadcast element
        h = KeyedBroadcastProcessFunctionHarness(
            ParityNames(), lambda t: t[0], parallelism=2, subtask=subtask
        )
        for value in keyed:
            if subtask_of(value[0]) == subtask:
                h.process_element(value, timestamp=int(value[1]))
        for element in broadcast:
            h.process_broadcast_element(element, timestamp=int(element[1]))
        h.end_input()
        out += h.get_output()
        h.close()
    assert sorted(out) == [  # PyFlink's expected output
        "value: 0a, ts: 1603708215000", "value: 0a, ts: 1603708215000", "value: 1, ts: 1603708221000",
        "value: 1b, ts: 1603708215000", "value: 1b, ts: 1603708215000", "value: 2, ts: 1603708222000",
        "value: 3, ts: 1603708223000", "value: 4, ts: 1603708224000", "value: a2, ts: 1603708212000",
        "value: a4, ts: 1603708214000", "value: b1, ts: 1603708211000", "value: b3, ts: 1603708213000",
    ]  # fmt: skip
