"""The RocksDB backend through the checkpoint layer: heap -> RocksDB -> heap at other
parallelisms (same Parquet format, every entry exactly once), snapshots written while
writes go on, type migration on restore."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from rescale_job import CLOCK, KEYS, LIST, MAP, SPREAD, VALUE, entries, write_initial
from test_migrate import NEW_ROW, _checkpoint, _old_types

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, open_checkpoint
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    RocksDBKeyedStateBackend,
    StateTtlConfig,
    Time,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.ttl import ManualTimeProvider


def restore(checkpoint: CompletedCheckpoint, p: int, root: Path | None) -> list[Any]:
    """Every subtask of ``p`` restored into RocksDB (``root`` given) or the heap."""
    out = []
    for i in range(p):
        if root is None:
            out.append(checkpoint.keyed_backend("op", i, p, time_provider=CLOCK))
            continue
        path = root / f"subtask-{i}-{uuid.uuid4().hex[:6]}"
        factory = lambda **kw: RocksDBKeyedStateBackend(path, **kw)  # noqa: B023, E731
        out.append(checkpoint.keyed_backend("op", i, p, backend_factory=factory, time_provider=CLOCK))
    return out


def checkpoint_of(url: str, backends: list[Any]) -> CompletedCheckpoint:
    pending = CheckpointStorage(url).begin()
    for i, b in enumerate(backends):
        pending.write_subtask("op", i, len(backends), 128, keyed=b)
    return pending.commit()


@pytest.mark.parametrize(("rocks_p", "heap_p"), [(1, 4), (2, 3), (5, 1)])
def test_heap_to_rocksdb_to_heap(tmp_path: Path, rocks_p: int, heap_p: int) -> None:
    url = f"memory://rocksdb/{uuid.uuid4().hex}"
    written, first = write_initial(url)
    rocks = restore(first, rocks_p, tmp_path)
    try:
        assert all(isinstance(b, RocksDBKeyedStateBackend) for b in rocks)
        assert Counter(e for b in rocks for e in entries(b)) == Counter(written)
        owner = {k: b for b in rocks for k in b.get_keys("value")}
        assert sorted(owner, key=lambda k: k[1]) == KEYS
        b = owner[KEYS[35]]
        b.set_current_key(KEYS[35])
        assert b.get_state(VALUE).value() == (35, None)
        assert list(b.get_partitioned_state(("window", 2), LIST).get()) == ["w35"]
        assert b.get_aggregating_state(SPREAD).get() == 35
        assert dict(b.get_map_state(MAP).items()) == {35: 17.5, -35: float("-inf")}
        second = checkpoint_of(url, rocks)
    finally:
        for b in rocks:
            b.close()
    heap = restore(second, heap_p, None)
    assert all(isinstance(b, HeapKeyedStateBackend) for b in heap)
    assert Counter(e for b in heap for e in entries(b)) == Counter(written)
    assert second.manifest.operators[0].keyed_states == first.manifest.operators[0].keyed_states


def test_checkpoint_is_consistent_while_writes_go_on(tmp_path: Path) -> None:
    url = str(tmp_path / "root")
    desc, lst = ValueStateDescriptor("v", Types.LONG()), ListStateDescriptor("l", Types.STRING())
    with RocksDBKeyedStateBackend(tmp_path / "db", max_parallelism=128) as b:
        for k in range(2000):
            b.set_current_key(k)
            b.get_state(desc).update(k)
            b.get_list_state(lst).add(str(k))
        pending = CheckpointStorage(url).begin()
        future = pending.write_subtask("op", 0, 1, 128, keyed=b)  # snapshot taken here, written later
        for k in range(0, 4000, 2):  # writes while the checkpoint is written in the background
            b.set_current_key(k)
            b.get_state(desc).update(-k)
            b.get_list_state(lst).add("late")
        future.result()
        pending.commit()
    restored = open_checkpoint(url).keyed_backend("op", 0, 1)
    assert sorted(restored.get_keys("v")) == list(range(2000))
    for k in (0, 1, 1998, 1999):
        restored.set_current_key(k)
        assert restored.get_state(desc).value() == k
        assert list(restored.get_list_state(lst).get()) == [str(k)]


def test_types_migrate_when_restored_into_rocksdb(tmp_path: Path) -> None:
    root = _checkpoint(tmp_path / "root", _old_types)
    b = open_checkpoint(root).keyed_backend(
        "op", 0, 1, backend_factory=lambda **kw: RocksDBKeyedStateBackend(tmp_path / "db", **kw)
    )
    try:
        b.set_current_key(7)
        assert b.get_state(ValueStateDescriptor("int", Types.LONG())).value() == 7
        assert b.get_state(ValueStateDescriptor("float", Types.DOUBLE())).value() == 3.5
        assert b.get_state(ValueStateDescriptor("row", NEW_ROW)).value() == (7, None)
        assert list(b.get_list_state(ListStateDescriptor("rows", NEW_ROW)).get()) == [(7, None)]
        state = b.get_map_state(MapStateDescriptor("map", Types.LONG(), NEW_ROW))
        assert state.get(7) == (7, None)
        state.put(2**40, (1, "x"))  # the user key is a LONG now
        assert sorted(b.get_keys("map")) == list(range(50))
        with b.snapshot() as snap:
            assert snap.states["map"].meta.user_key_type == Types.LONG()
    finally:
        b.close()


def test_ttl_state_migrates_with_its_timestamps(tmp_path: Path) -> None:
    clock = ManualTimeProvider(5_000)
    ttl = StateTtlConfig.new_builder(Time.seconds(10)).disable_cleanup_in_background().build()

    def desc(element: Any) -> ListStateDescriptor:
        d = ListStateDescriptor("l", element)
        d.enable_time_to_live(ttl)
        return d

    heap = HeapKeyedStateBackend(key_type=Types.LONG(), time_provider=clock)
    for k in range(20):
        heap.set_current_key(k)
        heap.get_list_state(desc(Types.INT())).add_all([k, -k])
    pending = CheckpointStorage(str(tmp_path / "root")).begin()
    pending.write_keyed("op", heap)
    pending.commit()
    clock.advance(9_000)
    b = open_checkpoint(str(tmp_path / "root")).keyed_backend(
        "op",
        0,
        1,
        backend_factory=lambda **kw: RocksDBKeyedStateBackend(tmp_path / "db", **kw),
        time_provider=clock,
    )
    try:
        state = b.get_list_state(desc(Types.LONG()))
        b.set_current_key(3)
        assert list(state.get()) == [3, -3]
        clock.advance(1_000)  # the restored timestamps (5,000) expire at 15,000
        assert list(state.get()) == []
    finally:
        b.close()
