"""TimerQueue.register()'s C fast path against its Python method (the model and the fallback).

Two timer queues on two heap backends get the same random operations: one registers
through ``register()`` (the C function when the accelerator is built), the other through
the Python method called directly. Every outcome (errors included), the live timers, the
timer state and the order timers fire in must agree, over the keys users pass (ints,
unicode, namedtuples, plain tuples) and the times they pass (ints at the LONG bounds and
past them, numpy ints, bools, floats, strings).
"""

from __future__ import annotations

import random
from collections import namedtuple
from typing import Any

import numpy as np
import pytest

from flinkstate.state import HeapKeyedStateBackend, Types
from flinkstate.state.process import timers
from flinkstate.state.process.timers import TimeDomain, TimerQueue

Point = namedtuple("Point", "x y")
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

KEYS: dict[str, Any] = {
    "long": (Types.LONG(), lambda i: i - 50),
    "unicode": (Types.STRING(), lambda i: f"ключ-{i}-🔑"),
    "namedtuple": (Types.PICKLED_BYTE_ARRAY(), lambda i: Point(i, str(i))),
    "tuple": (Types.ROW([Types.LONG(), Types.STRING()]), lambda i: (i, f"s{i}")),
}
TIMES: list[Any] = [
    0, 1, 7, 1000, -5, LONG_MIN, LONG_MAX, LONG_MAX + 1, LONG_MIN - 1, 2**100,
    np.int64(7), np.int32(1000), True, 7.0, "7", None,
]  # fmt: skip


def _outcome(call: Any, *args: Any) -> Any:
    try:
        return ("ok", call(*args))
    except Exception as exc:  # both paths must fail alike
        return (type(exc).__name__, str(exc))


def test_the_accelerator_is_installed_where_built() -> None:
    if timers._timerpath is None:
        pytest.skip("the C accelerator is not built here (no compiler at install): the Python path is tested")
    assert TimerQueue.register is not timers.PYTHON_REGISTER


@pytest.mark.parametrize("key_kind", sorted(KEYS))
@pytest.mark.parametrize("domain", list(TimeDomain))
def test_c_and_python_paths_agree(key_kind: str, domain: TimeDomain) -> None:
    key_type, make_key = KEYS[key_kind]
    rng = random.Random(f"{key_kind}-{domain}")
    backends = [HeapKeyedStateBackend(key_type=key_type, max_parallelism=8) for _ in range(2)]
    queues = [TimerQueue(b, domain) for b in backends]
    registers = [queues[0].register, lambda t: timers.PYTHON_REGISTER(queues[1], t)]
    keys = [make_key(i) for i in range(100)]
    for step in range(6000):
        op = rng.random()
        if op < 0.02 and step > 0:  # no current key: both refuse
            for b in backends:
                b._ctx.key = None
        elif op < 0.3:
            key = rng.choice(keys)
            for b in backends:
                b.set_current_key(key)
        if op < 0.85:
            time = rng.choice(TIMES) if rng.random() < 0.2 else rng.randrange(0, 50)
            got = [_outcome(r, time) for r in registers]
            assert got[0] == got[1], (step, time)
        elif op < 0.95:
            time = rng.randrange(0, 50)
            got = [_outcome(q.delete, time) for q in queues]
            assert got[0] == got[1], (step, time)
        else:
            upto = rng.randrange(0, 50)
            fired = [list(q.pop_due(upto)) for q in queues]
            assert fired[0] == fired[1], step
        assert set(queues[0].timers()) == set(queues[1].timers()), step
    with_timers = [set(b.get_keys(timers.TIMER_STATES[domain])) for b in backends]
    assert with_timers[0] == with_timers[1]
    assert list(queues[0].pop_due(LONG_MAX)) == list(queues[1].pop_due(LONG_MAX))
    assert queues[0].timers() == queues[1].timers() == []


def test_a_registered_timer_is_known_to_the_fast_path_and_fires_once() -> None:
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=8)
    queue = TimerQueue(backend, TimeDomain.PROCESSING_TIME)
    backend.set_current_key(3)
    for _ in range(5):
        queue.register(10)
    backend.set_current_key(4)
    queue.register(10)
    queue.register(np.int64(10))
    assert sorted(queue.timers()) == [(3, 10), (4, 10)]
    assert list(queue.pop_due(10)) == [(10, 3), (10, 4)]  # registered first, fired first
    backend.set_current_key(3)
    queue.register(10)  # fired: a new timer
    assert queue.timers() == [(3, 10)]
