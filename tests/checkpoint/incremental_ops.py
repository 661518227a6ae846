"""Random operation sequences over every state kind, for the incremental checkpoint tests."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.state import (
    AbstractKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.ttl.time import ManualTimeProvider

from state_functions import Sum

TTL_MS = 50


def _ttl(full_snapshot: bool = False) -> StateTtlConfig:
    builder = StateTtlConfig.new_builder(timedelta(milliseconds=TTL_MS)).cleanup_incrementally(3, True)
    return (builder.cleanup_full_snapshot() if full_snapshot else builder).build()


def descriptors() -> dict[str, Any]:
    value = ValueStateDescriptor("value", Types.LONG())
    ttl_value = ValueStateDescriptor("ttl_value", Types.STRING())
    ttl_value.enable_time_to_live(_ttl())
    ttl_list = ListStateDescriptor("ttl_list", Types.LONG())
    ttl_list.enable_time_to_live(_ttl())
    ttl_map = MapStateDescriptor("ttl_map", Types.STRING(), Types.LONG())
    ttl_map.enable_time_to_live(_ttl())
    ttl_full = ValueStateDescriptor("ttl_full", Types.LONG())
    ttl_full.enable_time_to_live(_ttl(full_snapshot=True))
    return {
        "ttl_full": ttl_full,
        "value": value,
        "list": ListStateDescriptor("list", Types.STRING()),
        "map": MapStateDescriptor("map", Types.STRING(), Types.LONG()),
        "sum": ReducingStateDescriptor("sum", Sum(), Types.LONG()),
        "windows": ValueStateDescriptor("windows", Types.STRING()),  # used with namespaces
        "ttl_value": ttl_value,
        "ttl_list": ttl_list,
        "ttl_map": ttl_map,
    }


class Workload:
    """Applies random operations to a backend (whose time provider is ``clock``)."""

    def __init__(self, seed: int, keys: list[Any], clock: ManualTimeProvider) -> None:
        self.rng = random.Random(seed)
        self.keys = keys
        self.clock = clock
        self.desc = descriptors()

    def run(self, backend: AbstractKeyedStateBackend, n: int) -> None:
        for _ in range(n):
            self.step(backend)

    def step(self, backend: AbstractKeyedStateBackend) -> None:
        r, d = self.rng, self.desc
        backend.set_current_key(r.choice(self.keys))
        op = r.randrange(18)
        text = f"s{r.randrange(6)}-é"
        if op == 0:
            backend.get_state(d["value"]).update(r.randrange(10**6))
        elif op == 1:
            backend.get_state(d["value"]).clear()
        elif op == 2:
            backend.get_list_state(d["list"]).add(text)
        elif op == 3:
            backend.get_list_state(d["list"]).update([text] * r.randrange(3))
        elif op == 4:
            backend.get_list_state(d["list"]).clear()
        elif op == 5:
            backend.get_map_state(d["map"]).put(text, r.randrange(100))
        elif op == 6:
            backend.get_map_state(d["map"]).remove(text)
        elif op == 7:
            backend.get_map_state(d["map"]).put_all({text: 1, "x": r.randrange(5)})
        elif op == 8:
            backend.get_map_state(d["map"]).clear()
        elif op == 9:
            backend.get_reducing_state(d["sum"]).add(r.randrange(10))
        elif op == 10:
            backend.get_partitioned_state(r.randrange(3), d["windows"]).update(text)
        elif op == 11:
            backend.get_partitioned_state(r.randrange(3), d["windows"]).clear()
        elif op == 12:
            backend.get_state(d["ttl_value"]).update(text)
        elif op == 13:
            backend.get_list_state(d["ttl_list"]).add(r.randrange(9))
        elif op == 14:
            backend.get_map_state(d["ttl_map"]).put(text, r.randrange(9))
        elif op == 15:
            backend.get_state(d["ttl_value"]).value()  # a read: may expire, and cleans up
        elif op == 16:
            backend.get_state(d["ttl_full"]).update(r.randrange(9))
        else:
            self.clock.advance(r.randrange(1, 15))  # entries expire; incremental cleanup removes them


def checkpoint_now(
    storage: CheckpointStorage, backend: AbstractKeyedStateBackend, uid: str = "op"
) -> CompletedCheckpoint:
    """Write ``backend`` as the next checkpoint of ``storage`` and commit it."""
    pending = storage.begin()
    pending.write_keyed(uid, backend)
    return pending.commit()
