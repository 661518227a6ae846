"""What PyFlink code does that the state API must allow unchanged: iterating a ListState,
the read-only broadcast state's ``[]``/``in``/iteration, the time of the broadcast
function's keyed-side context, the runtime context's task names, attempt, job parameters
and metric group, and ``open``/``close`` of reduce and aggregate functions."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
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
    ReduceFunction,
    ReducingStateDescriptor,
    RuntimeContext,
    StateTtlConfig,
    Types,
)
from flinkstate.state.errors import InvalidArgumentError
from flinkstate.state.process.metrics import MetricGroup

from process_functions import RULES


class IterList(KeyedProcessFunction):
    """Adds each element to a list and yields ``[x for x in list_state]`` and ``get()``."""

    def __init__(self, ttl: int | None = None) -> None:
        self.ttl = ttl

    def open(self, runtime_context: RuntimeContext) -> None:
        desc = ListStateDescriptor("seen", Types.STRING())
        if self.ttl is not None:
            desc.enable_time_to_live(StateTtlConfig.new_builder(timedelta(milliseconds=self.ttl)).build())
        self.seen = runtime_context.get_list_state(desc)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        self.seen.add(value)
        yield [x for x in self.seen], list(self.seen.get())


@pytest.mark.parametrize("ttl", [None, 10])
def test_list_state_iterates_as_get(make_backend: Any, ttl: int | None) -> None:
    model: list[str] = []
    with KeyedProcessFunctionHarness(IterList(ttl), lambda v: "k", backend_factory=make_backend) as h:
        for i, value in enumerate(["a", "é", "a", "b"]):
            if ttl is not None and i == 2:
                h.set_processing_time(ttl + 1)  # the elements so far expire
                model.clear()
            model.append(value)
            h.process_element(value)
            iterated, got = h.extract_output()[0]
            assert iterated == got == model


class Watcher(KeyedBroadcastProcessFunction):
    """Yields what the keyed side sees of the broadcast state and of time."""

    def process_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext
    ) -> Iterator[Any]:
        rules = ctx.get_broadcast_state(RULES)
        known = value in rules
        yield value, known, rules[value] if known else None, sorted(rules)
        yield ctx.timestamp(), ctx.current_processing_time(), ctx.current_watermark()

    def process_broadcast_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.Context
    ) -> Iterator[Any]:
        ctx.get_broadcast_state(RULES).put(*value)
        yield from ()


def test_read_only_broadcast_state_and_time() -> None:
    with KeyedBroadcastProcessFunctionHarness(Watcher(), lambda v: v, processing_time=7) as h:
        h.process_broadcast_element(("b", 2))
        h.process_broadcast_element(("a", 1))
        h.process_watermark(40)
        h.process_element("a", timestamp=50)
        h.set_processing_time(9)
        h.process_element("z")
        assert h.extract_output() == [
            ("a", True, 1, ["a", "b"]),
            (50, 7, 40),
            ("z", False, None, ["a", "b"]),
            (None, 9, 40),
        ]


class Describe(KeyedProcessFunction):
    """Yields, per element, what the runtime context said in ``open`` and a counter's count."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.said = (
            runtime_context.get_task_name(),
            runtime_context.get_task_name_with_subtasks(),
            runtime_context.get_attempt_number(),
            runtime_context.get_job_parameter("env", "dev"),
            runtime_context.get_job_parameter("region", "none"),
        )
        group = runtime_context.get_metrics_group().add_group("words")
        self.counter = group.counter("seen")
        self.meter = group.meter("rate", time_span_in_seconds=10)
        self.sizes = group.distribution("sizes")
        group.gauge("last", lambda: 1)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        self.counter.inc()
        self.meter.mark_event(2)
        self.sizes.update(len(value))
        yield self.said, self.counter.get_count(), self.meter.get_count()


def test_runtime_context_names_attempt_parameters_and_metrics() -> None:
    harness = KeyedProcessFunctionHarness(
        Describe(),
        lambda v: "0",  # in key group 64..95: subtask 2 of 4's
        parallelism=4,
        subtask=2,
        task_name="counts",
        attempt_number=3,
        job_parameters={"env": "prod"},
    )
    with harness as h:
        h.process_element("ab")
        h.process_element("abcd")
        said = ("counts", "counts (3/4)#3", 3, "prod", "none")
        assert h.extract_output() == [(said, 1, 2), (said, 2, 4)]
        words = h.operator.metrics.add_group("words")
        assert words.distribution("sizes").__dict__ == {"count": 2, "sum": 6, "min": 2, "max": 4}
    with KeyedProcessFunctionHarness(Describe(), lambda v: v) as h:
        h.process_element("x")
        assert h.extract_output()[0][0] == ("Describe", "Describe (1/1)#0", 0, "dev", "none")


def test_metric_group_is_pyflinks() -> None:
    group = MetricGroup()
    assert group.add_group("a", "b") is group.add_group("a", "b")
    assert group.add_group("a", "b").scope == ("a", "b")
    assert group.add_group("a").counter("n") is group.add_group("a").counter("n")
    group.gauge("g", lambda: 5)
    assert group.metrics["g"].value() == 5  # type: ignore[union-attr]
    with pytest.raises(InvalidArgumentError, match=r"\[INVALID_METRIC_NAME\].*is a Gauge"):
        group.counter("g")
    with pytest.raises(InvalidArgumentError, match=r"\[INVALID_METRIC_NAME\]"):
        group.counter("")
    with pytest.raises(InvalidArgumentError, match=r"\[INVALID_METRIC_NAME\]"):
        group.gauge("h", 5)  # type: ignore[arg-type]


class Sum(ReduceFunction):
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def open(self, runtime_context: RuntimeContext) -> None:
        self.log.append(("open reduce", runtime_context.get_job_parameter("scale", "1")))
        self.scale = int(runtime_context.get_job_parameter("scale", "1"))

    def reduce(self, value1: int, value2: int) -> int:
        return value1 + value2 * self.scale

    def close(self) -> None:
        self.log.append("close reduce")


class Count(AggregateFunction):
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def open(self, runtime_context: RuntimeContext) -> None:
        self.log.append("open aggregate")

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + 1

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, acc_a: int, acc_b: int) -> int:
        return acc_a + acc_b

    def close(self) -> None:
        self.log.append("close aggregate")


class SumAndCount(KeyedProcessFunction):
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def open(self, runtime_context: RuntimeContext) -> None:
        reduce, agg = Sum(self.log), Count(self.log)
        desc = ReducingStateDescriptor("total", reduce, Types.LONG())
        self.total = runtime_context.get_reducing_state(desc)
        runtime_context.get_reducing_state(desc)  # one function, opened once
        ttl = StateTtlConfig.new_builder(timedelta(seconds=1)).build()
        aggregating = AggregatingStateDescriptor("n", agg, Types.LONG())
        aggregating.enable_time_to_live(ttl)
        self.n = runtime_context.get_aggregating_state(aggregating)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        self.total.add(value)
        self.n.add(value)
        yield self.total.get(), self.n.get()

    def close(self) -> None:
        self.log.append("close process")


def test_reduce_and_aggregate_functions_are_opened_and_closed(make_backend: Any) -> None:
    log: list[Any] = []
    harness = KeyedProcessFunctionHarness(
        SumAndCount(log), lambda v: "k", job_parameters={"scale": "10"}, backend_factory=make_backend
    )
    assert log == [("open reduce", "10"), "open aggregate"]
    harness.process_element(1)
    harness.process_element(2)
    assert harness.extract_output() == [(1, 1), (21, 2)]
    harness.close()
    assert log[2:] == ["close process", "close reduce", "close aggregate"]
