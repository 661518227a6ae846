"""Rescaling: state written by 3 subtasks (max parallelism 128) restored at 1, 2, 5 and 7,
checkpointed there and restored at 3 again; keyed, operator (split, union, broadcast)
and raw state each arrive exactly once (or, by mode, everywhere)."""

from __future__ import annotations

import datetime
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, open_checkpoint
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


@pytest.mark.parametrize(
    ("where", "new_p"), [("memory", 1), ("memory", 2), ("local", 5), ("memory", 7), ("local", 3)]
)
def test_keyed_and_operator_state_rescale_and_back(tmp_path: Path, where: str, new_p: int) -> None:
    url = f"memory://rescale/{uuid.uuid4().hex}" if where == "memory" else str(tmp_path / "root")
    written, _ = write_initial(url)
    assert len(written) > 4 * len(KEYS)
    rescaled = restore_all(open_checkpoint(url), new_p)
    check_subtasks(rescaled, written, kept=new_p == 3)
    # reads through the state API on the subtask that owns a key
    owner = {k: i for i, (b, _) in enumerate(rescaled) for k in b.get_keys("value")}
    assert sorted(owner, key=lambda k: k[1]) == KEYS
    keyed = rescaled[owner[KEYS[35]]][0]
    keyed.set_current_key(KEYS[35])
    assert keyed.get_state(VALUE).value() == (35, None)
    assert list(keyed.get_partitioned_state(("window", 2), LIST).get()) == ["w35"]
    assert keyed.get_aggregating_state(SPREAD).get() == 35
    assert dict(keyed.get_map_state(MAP).items()) == {35: 17.5, -35: float("-inf")}

    pending = CheckpointStorage(url).begin()
    for i, (keyed, ops) in enumerate(rescaled):
        union = ops.get_union_list_state(UNION)  # an operator keeps its share of union state
        union.update(sorted(union.get())[i::new_p])
        pending.write_subtask("op", i, new_p, MAX_P, keyed=keyed, operator=ops)
    pending.commit()
    assert open_checkpoint(url).manifest.operators[0].parallelism == new_p
    check_subtasks(restore_all(open_checkpoint(url), 3), written, kept=new_p == 3)  # back at 3


@pytest.mark.parametrize("new_p", [1, 2, 5, 7, 3])
def test_raw_state_redistributes(tmp_path: Path, new_p: int) -> None:
    _, checkpoint = write_initial(f"memory://rescale/{uuid.uuid4().hex}")
    seen: list[int] = []
    blobs: list[list[bytes]] = []
    for i in range(new_p):
        raw = checkpoint.raw_keyed("op", i, new_p)
        owned = key_groups_of(MAX_P, new_p, i)
        assert set(raw) == set(owned)  # every key group of the range, empty blobs too
        assert all(data == f"raw-{kg}".encode() * (kg % 3) for kg, data in raw.items())
        seen += raw
        blobs.append(checkpoint.raw_operator("op", i, new_p))
    assert sorted(seen) == list(range(MAX_P))
    everything = [f"blob-{i}-{j}".encode() for i in range(3) for j in range(i + 2)]
    assert sorted(b for part in blobs for b in part) == sorted(everything)
    if new_p == 3:  # unchanged parallelism: each subtask keeps its own
        assert blobs == [[f"blob-{i}-{j}".encode() for j in range(i + 2)] for i in range(3)]
    else:
        assert max(map(len, blobs)) - min(map(len, blobs)) <= 1


def test_raw_state_alone_without_keyed_state(tmp_path: Path) -> None:
    pending = CheckpointStorage(str(tmp_path / "root")).begin()
    for i in range(2):
        rng = key_groups_of(16, 2, i)
        pending.write_subtask(
            "raw", i, 2, 16, raw_keyed={kg: bytes([kg]) for kg in rng if kg % 2}, raw_operator=[b"x" * i],
            key_group_range=rng,
        )  # fmt: skip
    checkpoint = pending.commit()
    assert checkpoint.manifest.operators[0].subtasks[1].key_group_range == (8, 15)
    parts = [checkpoint.raw_keyed("raw", i, 3) for i in range(3)]
    assert {kg: b for part in parts for kg, b in part.items()} == {kg: bytes([kg]) for kg in range(1, 16, 2)}
    for i, part in enumerate(parts):
        assert set(part) <= set(key_groups_of(16, 3, i))
    assert sorted(b for i in range(3) for b in checkpoint.raw_operator("raw", i, 3)) == [b"", b"x"]
    restored = checkpoint.keyed_backend("raw", 0, 1)  # no keyed state: an empty backend
    assert restored.state_names() == [] and restored.max_parallelism == 16
