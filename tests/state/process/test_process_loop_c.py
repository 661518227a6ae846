"""The C loop of ``KeyedProcessOperator.process_elements`` (``_loop.process_keyed``)
against the Python loop it replaces, as its model: on every keyed backend, with keys of
each integral type, strings, tuples and ROWs, inferred key types, keys outside the range,
keys to coerce or refuse, functions that raise or return None, tuples, lists, generators
(one that fails midway), timers, TTL incremental cleanup (key listeners), event time with
a watermark delay, inputs of unequal lengths. Same output, state, timers, error (message,
cause, context), element by element."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, NamedTuple

import numpy as np
import pytest

from flinkstate.state import (
    HeapKeyedStateBackend,
    KeyedProcessFunction,
    RuntimeContext,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.errors import FlinkStateError
from flinkstate.state.keygroups.assignment import KeyGroupRange
from flinkstate.state.process import KeyedProcessOperator
from flinkstate.state.process import operator as operator_module
from flinkstate.state.process.harness import take_snapshot
from flinkstate.state.ttl.time import ManualTimeProvider

C_LOOP = operator_module._process_keyed
NO_C = "the C accelerator is not built; the Python loop is tested in its place (test_process_fast_path)"
pytestmark = pytest.mark.skipif(C_LOOP is None, reason=NO_C)


class Point(NamedTuple):
    x: int
    label: str


class Stop(BaseException):
    """Not an Exception: passes through unwrapped, as in the Python loop."""


class Mixed(KeyedProcessFunction):
    """Every way a function can end: each value says what to do."""

    def __init__(self, ttl_on: bool) -> None:
        self.ttl_on = ttl_on
        self.calls = 0

    def open(self, runtime_context: RuntimeContext) -> None:
        self.runtime = runtime_context
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def _ttl_state(self) -> Any:  # created on first use: its key listener joins mid-run
        desc = ValueStateDescriptor("last", Types.PICKLED_BYTE_ARRAY())
        desc.enable_time_to_live(
            StateTtlConfig.new_builder(timedelta(milliseconds=5)).cleanup_incrementally(2, True).build()
        )
        return self.runtime.get_state(desc)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:
        self.calls += 1
        what = value[1]
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if self.ttl_on:
            self._ttl_state().update((ctx.get_current_key(), n))
        timers = ctx.timer_service()
        timers.register_processing_time_timer(n % 4)
        if ctx.timestamp() is not None:
            timers.register_event_time_timer(ctx.timestamp() + n % 3)
        key = ctx.get_current_key()
        if what == "raise":
            raise KeyError(f"bad {key!r}")
        if what == "stop":
            raise Stop(key)
        if what == "tuple":
            return ((key, n, ctx.timestamp()),)
        if what == "pair":
            return (key, n), ("pair", ctx.timestamp())
        if what == "list":
            return [(key, n), ("list", n)]
        if what == "gen":
            return self._gen(key, n, fail=False)
        if what == "gen-fail":
            return self._gen(key, n, fail=True)
        if what == "str":
            return "ab"
        if what == "int":
            return 7  # not iterable: a TypeError, wrapped
        return None

    @staticmethod
    def _gen(key: Any, n: int, fail: bool) -> Iterator[Any]:
        yield key, "gen", n
        if fail:
            raise ValueError("midway")
        yield key, "gen2", n

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Any:
        yield "timer", ctx.get_current_key(), timestamp, self.count.value()


OUTCOMES = ["none", "tuple", "pair", "list", "gen", "str"]
RARE = ["raise", "gen-fail", "int", "stop"]

# (declared key type or None to infer, key pool, foreign keys the setter coerces or refuses)
KEY_KINDS: dict[str, tuple[Any, list[Any], list[Any]]] = {
    "long": (
        Types.LONG(),
        [0, 1, -1, 255, 256, 1 << 40, -(1 << 63), (1 << 63) - 1, *range(2, 14)],
        [1 << 63, True, "1"],
    ),
    "int": (Types.INT(), [0, 7, -(1 << 31), (1 << 31) - 1, 300, *range(8, 20)], [1 << 31, np.int32(5)]),
    "short": (Types.SHORT(), [0, -1, 1 << 14, -(1 << 15), *range(1, 12)], [1 << 15]),
    "byte": (Types.BYTE(), [0, 1, 127, -128, *range(-12, -1)], [128, 2.0]),
    "string": (
        Types.STRING(),
        ["", "a", "ç", "日本", "🙂x", "long " * 9, *(f"k{i}" for i in range(12))],
        [b"a", 3],
    ),
    "row": (
        Types.ROW([Types.INT(), Types.STRING()]),
        [(1, "a"), (2, "é"), (-3, ""), *((i, f"r{i}") for i in range(12))],
        [Point(1, "a")],
    ),
    "inferred-int": (None, [5, 6, 1 << 50, -9, *range(100, 112)], [np.int64(6), "x"]),
    "inferred-str": (None, ["k", "ü", "🙂", *(f"s{i}" for i in range(12))], [1]),
    "inferred-tuple": (None, [Point(1, "a"), Point(2, "b"), *(Point(i, "p") for i in range(12))], [(1, "a")]),
    "boolean": (Types.BOOLEAN(), [True, False], [1, np.bool_(True)]),
    "double": (
        Types.DOUBLE(),
        [0.5, -1.0, float("inf"), *(i + 0.5 for i in range(12))],
        [1, np.float32(2.5)],
    ),
}


def _make(
    make_backend: Callable[..., Any], kind: str, rng: KeyGroupRange | None, ttl_on: bool
) -> tuple[KeyedProcessOperator, list[str]]:
    key_type = KEY_KINDS[kind][0]
    clock = ManualTimeProvider(100)
    kwargs: dict[str, Any] = {"max_parallelism": 8, "time_provider": clock}
    if key_type is not None:
        kwargs["key_type"] = key_type
    if rng is not None:
        kwargs["key_group_range"] = rng
    backend = make_backend(**kwargs)
    op = KeyedProcessOperator(Mixed(ttl_on), backend, clock=clock, watermark_delay=3)
    selected: list[str] = []  # a key listener of ours, before TTL's
    backend.register_key_selection_listener(lambda: selected.append(repr(backend.get_current_key())))
    op.open()
    return op, selected


def _describe(exc: BaseException | None) -> Any:
    if exc is None:
        return None
    cause, context = exc.__cause__, exc.__context__
    return (
        type(exc).__name__,
        str(exc),
        None if cause is None else (type(cause).__name__, str(cause)),
        None if context is None else (type(context).__name__, str(context), context is cause),
        exc.__suppress_context__,
    )


def _observe(op: KeyedProcessOperator) -> Any:
    backend = op.backend
    if backend.is_closed:
        return "closed"
    snap = take_snapshot(op)
    keyed = {
        name: sorted(
            ((kg, repr(k), repr(n), repr(v)) for kg, cols in groups.items() for k, n, v, _ in cols.entries()),
        )
        for name, (_, groups) in snap.keyed.items()
    }
    return (
        keyed,
        snap.key_type,
        snap.watermark,
        sorted(op.event_timers.timers(), key=repr),
        sorted(op.processing_timers.timers(), key=repr),
        op._ctx.ts,
        repr(backend.get_current_key()),
        backend.get_current_key_group(),
    )


def calls(op: KeyedProcessOperator) -> int:
    function = op.function
    assert isinstance(function, Mixed)
    return function.calls


def _run(make_backend: Callable[..., Any], case: dict[str, Any], use_c: bool) -> Any:
    operator_module._process_keyed = C_LOOP if use_c else None
    try:
        op, selected = _make(make_backend, case["kind"], case["range"], case["ttl"])
        steps: list[Any] = []
        for keys, values, stamps in case["chunks"]:
            error: BaseException | None = None
            try:
                op.process_elements(keys, iter(values), stamps)
            except BaseException as exc:  # Stop and zip's errors too
                error = exc
            if not op.backend.is_closed:
                op.clock.now += 1
                op.advance_processing_time()
            steps.append((op.drain(), _describe(error), calls(op), list(selected), _observe(op)))
        return steps
    finally:
        operator_module._process_keyed = C_LOOP


RANGE = KeyGroupRange(2, 5)


def _in_range(key_type: Any, key: Any) -> bool:
    backend = HeapKeyedStateBackend(key_type=key_type, max_parallelism=8, key_group_range=RANGE)
    try:
        backend.set_current_key(key)
    except FlinkStateError:
        return False
    return True


def _case(seed: int) -> dict[str, Any]:
    rnd = random.Random(seed)
    kind = sorted(KEY_KINDS)[seed % len(KEY_KINDS)]
    key_type, pool, foreign = KEY_KINDS[kind]
    ranged = rnd.random() < 0.4 and key_type is not None
    if ranged:  # keys of other key groups turn rare: they fail the chunk
        inside = [k for k in pool if _in_range(key_type, k)]
        foreign = foreign + [k for k in pool if k not in inside]
        pool = inside
    chunks = []
    t = 0
    for _ in range(rnd.randrange(3, 9)):
        n = rnd.randrange(0, 30)
        keys = [rnd.choice(foreign) if rnd.random() < 0.03 else rnd.choice(pool) for _ in range(n)]
        values = [(i, rnd.choice(RARE) if rnd.random() < 0.04 else rnd.choice(OUTCOMES)) for i in range(n)]
        stamps: list[Any] | None = None
        if rnd.random() < 0.5:
            stamps = []
            for _ in range(n):
                t += rnd.randrange(0, 6)
                late = rnd.randrange(0, 12) if rnd.random() < 0.2 else 0  # timers due at once
                stamps.append(None if rnd.random() < 0.1 else t - late)
        if rnd.random() < 0.05 and n:  # unequal lengths: zip's strict errors
            if rnd.random() < 0.5:
                values.pop()
            else:
                values.append((n, "none"))
        chunks.append((keys, values, stamps))
    return {"kind": kind, "range": RANGE if ranged else None, "ttl": rnd.random() < 0.5, "chunks": chunks}


@pytest.mark.parametrize("seed", range(40))
def test_c_loop_equals_the_python_loop(make_backend: Callable[..., Any], seed: int) -> None:
    case = _case(seed)
    fast = _run(make_backend, case, True)
    model = _run(make_backend, case, False)
    assert fast == model
    assert sum(len(out) for out, *_ in fast) > 0


def _one_chunk(kind: str, keys: list[Any], values: list[Any], stamps: list[Any] | None) -> dict[str, Any]:
    return {"kind": kind, "range": KeyGroupRange(0, 3), "ttl": True, "chunks": [(keys, values, stamps)]}


@pytest.mark.parametrize(
    "case",
    [
        _one_chunk("long", [1, 2, 3, 1 << 63], [(0, "tuple")] * 4, None),  # out of LONG range
        _one_chunk("int", [1, 1 << 31], [(0, "tuple")] * 2, None),  # out of INT range
        _one_chunk("long", [1, 2, 3, 4, 5, 6, 7, 8], [(0, "tuple")] * 8, None),  # some out of key-group range
        _one_chunk("string", ["a", "b", 3], [(0, "list")] * 3, None),  # wrong type
        _one_chunk("long", [1, True], [(0, "none")] * 2, None),  # a bool is no LONG
        _one_chunk("long", [1, None], [(0, "none")] * 2, None),  # no key
        _one_chunk("long", [1, 2], [(0, "gen-fail"), (1, "tuple")], [5, 9]),
        _one_chunk("long", [1, 2], [(0, "stop"), (1, "tuple")], None),
        _one_chunk("long", [1, 2], [(0, "int"), (1, "tuple")], None),
        _one_chunk("long", [1, 2, 3], [(0, "none"), (1, "none")], None),  # values shorter
        _one_chunk("long", [1, 2], [(0, "none"), (1, "none"), (2, "none")], [1, 2]),  # values longer
        _one_chunk("long", [1, 2], [(0, "none"), (1, "none")], [1]),  # stamps shorter
        _one_chunk("long", [1, 2], [(0, "none"), (1, "none")], [1, 2, 3]),  # stamps longer
        _one_chunk("inferred-int", [np.int64(3), 3, np.int64(4)], [(0, "tuple")] * 3, [10, 30, 20]),
    ],
    ids=lambda case: repr(case["chunks"][0][0])[:40],
)
def test_c_loop_fails_as_the_python_loop(make_backend: Callable[..., Any], case: dict[str, Any]) -> None:
    fast = _run(make_backend, case, True)
    assert fast == _run(make_backend, case, False)


class Closer(KeyedProcessFunction):
    """Closes its backend on the second element: the third key is refused as in Python."""

    def __init__(self, backend: Any) -> None:
        self.backend, self.seen = backend, 0

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:
        self.seen += 1
        if self.seen == 2:
            self.backend.close()
        return ((ctx.get_current_key(), value),)


def test_a_backend_closed_midway_refuses_the_next_key(make_backend: Callable[..., Any]) -> None:
    def run(use_c: bool) -> Any:
        backend = make_backend(key_type=Types.LONG(), max_parallelism=8)
        op = KeyedProcessOperator(Closer(backend), backend)
        op.open()
        operator_module._process_keyed = C_LOOP if use_c else None
        try:
            with pytest.raises(FlinkStateError, match="BACKEND_CLOSED"):
                op.process_elements([1, 2, 3], iter(["a", "b", "c"]))
        finally:
            operator_module._process_keyed = C_LOOP
        return op.drain()

    assert run(True) == run(False) == [(1, "a"), (None, "b")]


def test_a_failing_fail_keeps_the_original_as_context() -> None:
    """When building the wrapped error fails, that error propagates with the function's
    exception as its context (as a raise inside an except block)."""
    assert C_LOOP is not None

    def function(value: Any, ctx: Any) -> Any:
        raise KeyError(value)

    def fail(exc: Exception) -> BaseException:
        raise RuntimeError("fail failed")

    backend_op, _ = _make(HeapKeyedStateBackend, "long", None, False)
    backend = backend_op.backend
    with pytest.raises(RuntimeError, match="fail failed") as info:
        C_LOOP(
            backend.key_setter_spec, backend.set_current_key, [1], ["v"], None, function,
            backend_op._ctx, [], fail, None, backend.current_watermark, backend_op._advance_for,
        )  # fmt: skip
    assert isinstance(info.value.__context__, KeyError)
    assert info.value.__cause__ is None


def test_a_subclass_setter_is_respected() -> None:
    """A backend that overrides set_current_key gets no spec: the Python loop runs."""

    class Logged(HeapKeyedStateBackend):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.log: list[Any] = []

        def set_current_key(self, key: Any) -> None:
            self.log.append(key)
            super().set_current_key(key)

    backend = Logged(key_type=Types.LONG(), max_parallelism=8)
    assert backend.key_setter_spec is None
    op = KeyedProcessOperator(Mixed(False), backend)
    op.open()
    op.process_elements([4, 5], iter([(0, "tuple"), (1, "none")]))
    assert backend.log == [4, 5]
    assert op.drain() == [(4, 1, None)]


def test_an_instance_setter_is_respected() -> None:
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=8)
    log: list[Any] = []
    setter = backend.set_current_key

    def logged(key: Any) -> None:
        log.append(key)
        setter(key)

    backend.set_current_key = logged  # type: ignore[method-assign]
    assert backend.key_setter_spec is None
    op = KeyedProcessOperator(Mixed(False), backend)
    op.open()
    op.process_elements([4, 5], iter([(0, "tuple"), (1, "none")]))
    assert log == [4, 5]
    assert op.drain() == [(4, 1, None)]
