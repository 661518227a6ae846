"""TTL state through a checkpoint: timestamps kept, expired entries left out with
``cleanup_full_snapshot``, on both heap maps."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from checkpoint_data import dump

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, open_checkpoint
from flinkstate.state import (
    AggregateFunction,
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.ttl import ManualTimeProvider

TTL_MS = 10_000
START = 1_700_000_000_000
KEY_TYPE = Types.ROW_NAMED(["user", "n"], [Types.STRING(), Types.INT()])
KEYS = [(f"u{i}", i) for i in range(40)]
VALUE = Types.ROW_NAMED(["x", "label"], [Types.LONG(), Types.STRING()])


class Count(AggregateFunction[Any, tuple[int, int], int]):
    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: Any, accumulator: tuple[int, int]) -> tuple[int, int]:
        return (accumulator[0] + 1, accumulator[1] + value[0])

    def get_result(self, accumulator: tuple[int, int]) -> int:
        return accumulator[1]

    def merge(self, acc_a: tuple[int, int], acc_b: tuple[int, int]) -> tuple[int, int]:
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])


def descriptors(full_snapshot: bool) -> dict[str, StateDescriptor]:
    builder = StateTtlConfig.new_builder(datetime.timedelta(milliseconds=TTL_MS))
    if full_snapshot:
        builder = builder.cleanup_full_snapshot()
    config = builder.build()
    descs: dict[str, StateDescriptor] = {
        "value": ValueStateDescriptor("value", VALUE),
        "list": ListStateDescriptor("list", VALUE),
        "map": MapStateDescriptor("map", Types.STRING(), VALUE),
        "reducing": ReducingStateDescriptor("reducing", lambda a, b: (a[0] + b[0], b[1]), VALUE),
        "aggregating": AggregatingStateDescriptor(
            "aggregating", Count(), Types.TUPLE([Types.LONG(), Types.LONG()])
        ),
    }
    for desc in descs.values():
        desc.enable_time_to_live(config)
    return descs


def fill(backend: HeapKeyedStateBackend, clock: ManualTimeProvider, full_snapshot: bool) -> None:
    """Key i is written at START + 100 i (namespace 7 one second later); each list gets a
    second element and each map a second entry 5 s after the first."""
    descs = descriptors(full_snapshot)
    for late in (0, 5_000):
        for i, key in enumerate(KEYS):
            backend.set_current_key(key)
            for ns, shift in ((None, 0), (7, 1_000)):
                clock.now = START + 100 * i + shift + late
                item = (i + late, f"{key[0]}@{late}")
                if not late:
                    backend.get_partitioned_state(ns, descs["value"]).update(item)
                    backend.get_partitioned_state(ns, descs["reducing"]).add(item)
                    backend.get_partitioned_state(ns, descs["aggregating"]).add(item)
                backend.get_partitioned_state(ns, descs["list"]).add(item)
                backend.get_partitioned_state(ns, descs["map"]).put(f"at{late}", item)


def checkpoint(
    backend: HeapKeyedStateBackend, root: Path | str, options: dict[str, Any] | None = None
) -> CompletedCheckpoint:
    pending = CheckpointStorage(str(root), options).begin()
    pending.write_keyed("op", backend)
    pending.commit()
    return open_checkpoint(str(root), options)


@pytest.mark.parametrize("async_snapshots", [True, False], ids=["cow", "nested"])
def test_ttl_timestamps_survive_and_expiry_follows_them(
    location: tuple[str, dict[str, Any]], async_snapshots: bool
) -> None:
    clock = ManualTimeProvider(START)
    backend = HeapKeyedStateBackend(key_type=KEY_TYPE, time_provider=clock, async_snapshots=async_snapshots)
    fill(backend, clock, full_snapshot=False)
    before = dump(backend)
    assert before[("value", KEYS[3], 7)] == ((3, "u3@0"), START + 1_300)
    assert before[("list", KEYS[3], None)] == (
        [(3, "u3@0"), (5_003, "u3@5000")],
        [START + 300, START + 5_300],
    )
    assert before[("map", KEYS[3], 7)] == (
        {"at0": (3, "u3@0"), "at5000": (5_003, "u3@5000")},
        {"at0": START + 1_300, "at5000": START + 6_300},
    )

    clock.now = START + 20_000  # long after the write: a restore must not renew anything
    restored = checkpoint(backend, *location).keyed_backend(
        "op", 0, 1, time_provider=clock, async_snapshots=async_snapshots
    )
    assert dump(restored) == before

    descs = descriptors(full_snapshot=False)
    clock.now = START + TTL_MS + 1_000  # void entries of keys 0..10 expired, ns 7: key 0 only
    restored.set_current_key(KEYS[10])
    assert restored.get_state(descs["value"]).value() is None
    assert restored.get_partitioned_state(7, descs["value"]).value() == (10, "u10@0")
    assert list(restored.get_list_state(descs["list"]).get()) == [(5_010, "u10@5000")]
    assert dict(restored.get_partitioned_state(7, descs["map"]).items()) == {
        "at0": (10, "u10@0"),
        "at5000": (5_010, "u10@5000"),
    }
    assert restored.get_reducing_state(descs["reducing"]).get() is None
    assert restored.get_partitioned_state(7, descs["aggregating"]).get() == 10
    restored.set_current_key(KEYS[11])
    assert restored.get_state(descs["value"]).value() == (11, "u11@0")
    assert restored.get_reducing_state(descs["reducing"]).get() == (11, "u11@0")
    assert restored.get_aggregating_state(descs["aggregating"]).get() == 11
    clock.now = START + 5_000 + TTL_MS + 4_000  # the later list element / map entry of key 39 is still live
    restored.set_current_key(KEYS[39])
    assert list(restored.get_list_state(descs["list"]).get()) == []
    assert list(restored.get_partitioned_state(7, descs["list"]).get()) == [(5_039, "u39@5000")]
    assert dict(restored.get_map_state(descs["map"]).items()) == {}


@pytest.mark.parametrize("async_snapshots", [True, False], ids=["cow", "nested"])
def test_full_snapshot_cleanup_leaves_expired_entries_out_of_the_files(
    tmp_path: Path, async_snapshots: bool
) -> None:
    clock = ManualTimeProvider(START)
    backend = HeapKeyedStateBackend(key_type=KEY_TYPE, time_provider=clock, async_snapshots=async_snapshots)
    fill(backend, clock, full_snapshot=True)
    clock.now = START + TTL_MS + 2_050  # now - ttl = START + 2050
    live = dump(backend)  # snapshots judge expiry at the time they are taken
    assert len(list(backend.get_keys("value"))) == len(KEYS)  # still stored: nothing read them

    done = checkpoint(backend, tmp_path / "root")
    cutoff = clock.now - TTL_MS
    op = done.manifest.operators[0]
    for name in ("value", "list", "map", "reducing", "aggregating"):
        (ref,) = op.subtasks[0].keyed[name]
        table = pq.read_table(tmp_path / "root" / "chk-1" / ref.path)
        stamps = table.column("ttl_timestamp").to_pylist()
        flat = [t for s in stamps for t in s] if name == "list" else stamps
        assert flat and min(flat) > cutoff, name  # nothing expired was written
        rows = {
            (tuple(r["key"].values()), r["namespace"]) for r in table.select(["key", "namespace"]).to_pylist()
        }
        # void: keys 21.. (written at START + 100 i); namespace 7: keys 11.. (one second later)
        expected = {(k, None) for k in KEYS[21:]} | {(k, 7) for k in KEYS[11:]}
        if name in ("list", "map"):  # the entries added 5 s later are all live
            expected = {(k, ns) for k in KEYS for ns in (None, 7)}
        assert rows == expected, name
    lists = pq.read_table(tmp_path / "root" / "chk-1" / op.subtasks[0].keyed["list"][0].path)
    lengths = {(r["key"]["n"], r["namespace"]): len(r["value"]) for r in lists.to_pylist()}
    assert lengths[(3, None)] == 1 and lengths[(30, None)] == 2 and lengths[(15, 7)] == 2

    restored = done.keyed_backend("op", 0, 1, time_provider=clock, async_snapshots=async_snapshots)
    assert dump(restored) == live
    descs = descriptors(full_snapshot=True)
    restored.set_current_key(KEYS[3])
    assert list(restored.get_list_state(descs["list"]).get()) == [(5_003, "u3@5000")]
    assert restored.get_state(descs["value"]).value() is None
    assert sorted(restored.get_keys("value", 7)) == sorted(KEYS[11:])


def test_a_ttl_state_with_no_entries_in_a_subtask_range_restores(
    location: tuple[str, dict[str, Any]],
) -> None:
    clock = ManualTimeProvider(START)
    backend = HeapKeyedStateBackend(key_type=KEY_TYPE, time_provider=clock)
    descs = descriptors(full_snapshot=False)
    backend.set_current_key(KEYS[0])
    backend.get_state(descs["value"]).update((1, "one"))
    backend.get_list_state(descs["list"]).add((1, "one"))
    backend.get_map_state(descs["map"]).put("k", (1, "one"))
    done = checkpoint(backend, *location)
    found = []
    for i in range(4):  # three of the four subtasks own none of the (one key's) entries
        part = done.keyed_backend("op", i, 4, time_provider=clock)
        assert sorted(part.state_names()) == ["list", "map", "value"]
        found += [(i, k) for k in part.get_keys("list")]
        if not list(part.get_keys("value")):
            part.get_state(descs["value"])  # registering an empty restored state works
    assert [k for _, k in found] == [KEYS[0]]
