"""The job of the rescale tests: 3 subtasks (max parallelism 128) with keyed state of every
kind (TTL, namespaces), operator state (split, union, broadcast) and raw state; its entries by
key group, and the check that a restore at another parallelism has each exactly once (or, by
mode, everywhere). Used by ``reading/`` (restores, RocksDB) and ``writing/`` (streamed files)."""

from __future__ import annotations

import datetime
from collections import Counter
from typing import Any

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.state import (
    AggregateFunction,
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index as key_groups_of
from flinkstate.state.operator import OperatorStateBackend
from flinkstate.state.ttl import ManualTimeProvider

MAX_P = 128
KEY_TYPE = Types.ROW_NAMED(["tenant", "id"], [Types.STRING(), Types.LONG()])
KEYS = [(f"t{i % 7}", i) for i in range(300)]
CLOCK = ManualTimeProvider(1_000_000)


class MinMax(AggregateFunction[int, tuple[int, int], int]):
    def create_accumulator(self) -> tuple[int, int]:
        return (2**62, -(2**62))

    def add(self, value: int, accumulator: tuple[int, int]) -> tuple[int, int]:
        return (min(value, accumulator[0]), max(value, accumulator[1]))

    def get_result(self, accumulator: tuple[int, int]) -> int:
        return accumulator[1] - accumulator[0]

    def merge(self, acc_a: tuple[int, int], acc_b: tuple[int, int]) -> tuple[int, int]:
        return (min(acc_a[0], acc_b[0]), max(acc_a[1], acc_b[1]))


VALUE = ValueStateDescriptor("value", Types.ROW_NAMED(["a", "b"], [Types.LONG(), Types.STRING()]))
LIST = ListStateDescriptor("list", Types.STRING())
MAP = MapStateDescriptor("map", Types.LONG(), Types.DOUBLE())
MAP.enable_time_to_live(StateTtlConfig.new_builder(datetime.timedelta(hours=1)).build())
SUM = ReducingStateDescriptor("sum", lambda a, b: a + b, Types.LONG())
SPREAD = AggregatingStateDescriptor("spread", MinMax(), Types.TUPLE([Types.LONG(), Types.LONG()]))
SPLIT = ListStateDescriptor("offsets", Types.LONG())
UNION = ListStateDescriptor("partitions", Types.STRING())
BROADCAST = MapStateDescriptor("rules", Types.STRING(), Types.LIST(Types.LONG()))
RULES = {"r1": [1, 2], "r2": []}


def fill_subtask(i: int) -> tuple[HeapKeyedStateBackend, OperatorStateBackend]:
    """Subtask ``i`` of 3: keyed state for the keys it owns, and its operator state."""
    rng = key_groups_of(MAX_P, 3, i)
    keyed = HeapKeyedStateBackend(
        key_type=KEY_TYPE, max_parallelism=MAX_P, key_group_range=rng, time_provider=CLOCK
    )
    for key in KEYS:
        if assign_to_key_group(key, MAX_P, KEY_TYPE) not in rng:
            continue
        n = key[1]
        CLOCK.now = 1_000_000 + n
        keyed.set_current_key(key)
        keyed.get_state(VALUE).update((n, None if n % 2 else f"s{n}"))
        keyed.get_list_state(LIST).add_all([f"{n}a", f"{n}b"][: 1 + n % 2])
        keyed.get_map_state(MAP).put_all({n: n / 2})
        CLOCK.now += 1
        keyed.get_map_state(MAP).put(-n, float("-inf"))
        keyed.get_reducing_state(SUM).add(n)
        keyed.get_aggregating_state(SPREAD).add(n)
        keyed.get_aggregating_state(SPREAD).add(2 * n)
        if n % 5 == 0:
            keyed.get_partitioned_state(("window", n % 3), LIST).add(f"w{n}")
            keyed.get_partitioned_state(("window", n % 3), SUM).add(-n)
    ops = OperatorStateBackend()
    ops.get_list_state(SPLIT).add_all([i * 1000 + j for j in range(4 * i + 3)])  # 3, 7 and 11 elements
    ops.get_union_list_state(UNION).add_all([f"p{i}-{j}" for j in range(i + 1)])
    ops.get_broadcast_state(BROADCAST).put_all(RULES)
    return keyed, ops


Entry = tuple[str, Any, Any, Any, Any]


def entries(backend: HeapKeyedStateBackend) -> list[Entry]:
    """Every (state, key, namespace, value, timestamp) of a backend, checking key groups."""
    out: list[Entry] = []
    with backend.snapshot() as snap:
        for name, state in snap.states.items():
            for kg in snap.key_group_range:
                for e in state.entries(kg):
                    assert assign_to_key_group(e.key, MAX_P, KEY_TYPE) == kg
                    value = tuple(sorted(e.value.items())) if isinstance(e.value, dict) else e.value
                    value = tuple(value) if isinstance(value, list) else value
                    out.append((name, e.key, e.namespace, value, repr(e.timestamp)))
    return out


def write_initial(url: str) -> tuple[list[Entry], CompletedCheckpoint]:
    pending = CheckpointStorage(url).begin()
    written: list[Entry] = []
    for i in range(3):
        keyed, ops = fill_subtask(i)
        written += entries(keyed)
        raw = {kg: f"raw-{kg}".encode() * (kg % 3) for kg in keyed.key_group_range}
        blobs = [f"blob-{i}-{j}".encode() for j in range(i + 2)]
        pending.write_subtask("op", i, 3, MAX_P, keyed=keyed, operator=ops, raw_keyed=raw, raw_operator=blobs)
    return written, pending.commit()


def restore_all(
    checkpoint: CompletedCheckpoint, p: int
) -> list[tuple[HeapKeyedStateBackend, OperatorStateBackend]]:
    out = []
    for i in range(p):
        keyed = checkpoint.keyed_backend("op", i, p, time_provider=CLOCK)
        assert keyed.key_group_range == key_groups_of(MAX_P, p, i)
        out.append((keyed, checkpoint.operator_backend("op", i, p)))
    return out


def check_subtasks(
    subtasks: list[tuple[HeapKeyedStateBackend, OperatorStateBackend]],
    written: list[Entry],
    kept: bool = False,
) -> None:
    """Keyed entries and split elements exactly once, union and broadcast state everywhere;
    ``kept``: the split state was not redistributed (the parallelism did not change)."""
    keyed = [e for backend, _ in subtasks for e in entries(backend)]
    assert Counter(keyed) == Counter(written)  # every entry exactly once, nothing else
    splits = [list(ops.get_list_state(SPLIT).get()) for _, ops in subtasks]
    written_splits = [[i * 1000 + j for j in range(4 * i + 3)] for i in range(3)]
    if kept:
        assert splits == written_splits
    else:
        assert Counter(e for s in splits for e in s) == Counter(e for s in written_splits for e in s)
        assert max(map(len, splits)) - min(map(len, splits)) <= 1
    for _, ops in subtasks:
        assert sorted(ops.get_union_list_state(UNION).get()) == [
            f"p{i}-{j}" for i in range(3) for j in range(i + 1)
        ]
        assert dict(ops.get_broadcast_state(BROADCAST).items()) == RULES
