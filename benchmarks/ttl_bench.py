"""P12: incremental TTL cleanup: how fast unread entries go, and what it costs an access."""

from __future__ import annotations

import datetime
import random
import time
from collections.abc import Iterator

from flinkstate.state import HeapKeyedStateBackend, StateTtlConfig, Types, ValueStateDescriptor
from flinkstate.state.ttl import ManualTimeProvider

from common import Result, paired

TTL = datetime.timedelta(hours=1)


def _desc(cleanup_size: int | None) -> ValueStateDescriptor:
    builder = StateTtlConfig.new_builder(TTL)
    if cleanup_size is None:
        builder.disable_cleanup_in_background()
    else:
        builder.cleanup_incrementally(cleanup_size, False)
    desc = ValueStateDescriptor("v", Types.LONG())
    desc.enable_time_to_live(builder.build())
    return desc


def _cleanup_speed(n: int, cleanup_size: int) -> int:
    clock = ManualTimeProvider(0)
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), time_provider=clock)
    state = backend.get_state(_desc(cleanup_size))
    for k in range(n):
        backend.set_current_key(k)
        state.update(k)
    clock.advance(int(TTL.total_seconds() * 1000))
    table = backend.table("v")
    backend.set_current_key(-1)
    accesses = 0
    while len(table) > 0 and accesses < 4 * n:
        state.value()
        accesses += 1
    backend.close()
    return accesses


def _access_rate(records: list[int], cleanup_size: int | None) -> float:
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    state = backend.get_state(_desc(cleanup_size))
    for k in set(records):
        backend.set_current_key(k)
        state.update(k)
    set_key = backend.set_current_key
    start = time.perf_counter()
    for k in records:
        set_key(k)
        state.update(state.value() + 1)
    elapsed = time.perf_counter() - start
    backend.close()
    return len(records) / elapsed


def p12(quick: bool) -> Iterator[Result]:
    n = 200_000 if quick else 1_000_000
    size = 10
    accesses = _cleanup_speed(n, size)
    bound = n / size
    yield Result(
        "P12",
        f"accesses to one other key until {n} expired entries are gone (cleanup_size={size})",
        accesses,
        "accesses",
        "n / cleanup_size",
        bound,
        bound / accesses,
        "<= n / cleanup_size",
        accesses <= bound,
    )

    rnd = random.Random(3)
    records = [rnd.randrange(n) for _ in range(n)]
    on, off, ratio = paired(
        [(_access_rate(records, 5), _access_rate(records, None)) for _ in range(1 if quick else 5)]
    )
    yield Result(
        "P12",
        "TTL state access (value+update) with incremental cleanup (5/access)",
        on,
        "ops/s",
        "same access, background cleanup off",
        off,
        ratio,
        "cost <= 1.2x (ratio >= 0.833)",
        ratio >= 1 / 1.2,
    )


BENCHMARKS = {"P12": p12}
