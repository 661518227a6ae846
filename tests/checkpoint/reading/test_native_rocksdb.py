"""Native RocksDB checkpoints (``rocksdb_format="native"``) restore exactly what a Parquet
checkpoint of the same backends restores: into RocksDB at the same parallelism (by
files), after a rescale (clipping, merging), into the heap, and read per key group."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from rescale_job import CLOCK, KEYS, LIST, MAP, SPREAD, VALUE, entries, write_initial

from flinkstate.checkpoint import CheckpointError, CheckpointStorage, CompletedCheckpoint
from flinkstate.state import HeapKeyedStateBackend, RocksDBKeyedStateBackend


def rocks(tmp_path: Path, checkpoint: CompletedCheckpoint, p: int) -> list[RocksDBKeyedStateBackend]:
    out = []
    for i in range(p):
        path = tmp_path / f"rocks-{uuid.uuid4().hex[:8]}"
        factory = lambda **kw: RocksDBKeyedStateBackend(path, **kw)  # noqa: B023, E731
        backend = checkpoint.keyed_backend("op", i, p, backend_factory=factory, time_provider=CLOCK)
        assert isinstance(backend, RocksDBKeyedStateBackend)
        out.append(backend)
    return out


def checkpoint_into(storage: CheckpointStorage, backends: list[Any]) -> CompletedCheckpoint:
    pending = storage.begin()
    for i, b in enumerate(backends):
        pending.write_subtask("op", i, len(backends), 128, keyed=b)
    return pending.commit()


def everything(backends: list[Any]) -> Counter[Any]:
    return Counter(e for b in backends for e in entries(b))


@pytest.fixture
def native_and_parquet(tmp_path: Path) -> tuple[list[Any], CompletedCheckpoint, CompletedCheckpoint]:
    """The entries written, and one native and one Parquet checkpoint of the same 2 RocksDB backends."""
    written, first = write_initial(f"memory://native/{uuid.uuid4().hex}")
    live = rocks(tmp_path, first, 2)
    try:
        native = checkpoint_into(CheckpointStorage(str(tmp_path / "native"), rocksdb_format="native"), live)
        parquet = checkpoint_into(CheckpointStorage(str(tmp_path / "parquet")), live)
    finally:
        for b in live:
            b.close()
    return written, native, parquet


def test_native_manifest_lists_files_not_parquet(native_and_parquet: Any) -> None:
    _, native, _ = native_and_parquet
    for st in native.manifest.operators[0].subtasks:
        assert st.keyed == {} and st.native is not None
        ssts = [f for f in st.native.files if f.sst]
        assert ssts and all(f.ref.path.startswith("../_data/native/") for f in ssts)
        assert {cf for f in ssts for cf in f.column_families} == set(st.native.columns.values())
        rng = st.key_group_range
        assert rng is not None
        assert all(
            f.key_groups is not None and rng[0] <= f.key_groups[0] <= f.key_groups[1] <= rng[1] for f in ssts
        )
        assert {f.name for f in st.native.files} >= {"CURRENT"}


@pytest.mark.parametrize("p", [2, 3, 1])
def test_rocksdb_restore_matches_parquet(tmp_path: Path, native_and_parquet: Any, p: int) -> None:
    written, native, parquet = native_and_parquet
    from_native, from_parquet = rocks(tmp_path, native, p), rocks(tmp_path, parquet, p)
    try:
        assert everything(from_native) == everything(from_parquet) == Counter(written)
        owner = {k: b for b in from_native for k in b.get_keys("value")}
        assert sorted(owner, key=lambda k: k[1]) == KEYS
        b = owner[KEYS[35]]
        b.set_current_key(KEYS[35])
        assert b.get_state(VALUE).value() == (35, None)
        b.get_list_state(LIST).add("after")  # appends go on after the restored elements
        assert list(b.get_list_state(LIST).get())[-1] == "after"
        assert b.get_aggregating_state(SPREAD).get() == 35
        assert dict(b.get_map_state(MAP).items()) == {35: 17.5, -35: float("-inf")}
    finally:
        for b in (*from_native, *from_parquet):
            b.close()


@pytest.mark.parametrize("p", [1, 3])
def test_heap_restore_and_reads_match_parquet(native_and_parquet: Any, p: int) -> None:
    written, native, parquet = native_and_parquet
    heaps = [native.keyed_backend("op", i, p, time_provider=CLOCK) for i in range(p)]
    assert all(isinstance(b, HeapKeyedStateBackend) for b in heaps)
    assert everything(heaps) == Counter(written)

    def rows(c: CompletedCheckpoint, state: str) -> dict[int, list[Any]]:
        return {kg: [t.to_pylist() for t in tables] for kg, tables in c.read_keyed("op", state, range(0, 40))}

    for state in ("value", "list", "map", "spread"):
        assert rows(native, state) == rows(parquet, state)


def test_rocksdb_format_is_checked() -> None:
    with pytest.raises(CheckpointError, match=r"\[INVALID_ARGUMENT\].*rocksdb_format"):
        CheckpointStorage("memory://x/y", rocksdb_format="sst")


@pytest.mark.parametrize("p", [1, 3])
def test_an_operator_of_native_and_parquet_subtasks(tmp_path: Path, p: int) -> None:
    """Subtask 0 on RocksDB (its files), subtask 1 on the heap (Parquet): restores read both."""
    written, first = write_initial(f"memory://native/{uuid.uuid4().hex}")
    path = tmp_path / "mixed-0"
    factory = lambda **kw: RocksDBKeyedStateBackend(path, **kw)  # noqa: E731
    live = [
        first.keyed_backend("op", 0, 2, backend_factory=factory, time_provider=CLOCK),
        first.keyed_backend("op", 1, 2, time_provider=CLOCK),
    ]
    try:
        mixed = checkpoint_into(CheckpointStorage(str(tmp_path / "mixed"), rocksdb_format="native"), live)
    finally:
        live[0].close()
    assert [st.native is not None for st in mixed.manifest.operators[0].subtasks] == [True, False]
    heaps = [mixed.keyed_backend("op", i, p, time_provider=CLOCK) for i in range(p)]
    assert everything(heaps) == Counter(written)
    restored = rocks(tmp_path, mixed, p)
    try:
        assert everything(restored) == Counter(written)
    finally:
        for b in restored:
            b.close()


def test_a_state_only_some_subtasks_hold_is_merged(tmp_path: Path) -> None:
    """Subtask 0 never registered ``only1``: restored at 1, subtask 0's files are opened (an
    empty column family made for ``only1``) and subtask 1's entries copied in."""
    from flinkstate.state import Types, ValueStateDescriptor, compute_key_group_range_for_operator_index

    only = ValueStateDescriptor("only1", Types.LONG())
    both = ValueStateDescriptor("both", Types.STRING())
    ranges = [compute_key_group_range_for_operator_index(128, 2, i) for i in range(2)]
    live = [
        RocksDBKeyedStateBackend(tmp_path / f"live-{i}", Types.LONG(), 128, r) for i, r in enumerate(ranges)
    ]
    try:
        for k in range(400):
            b = next(b for b in live if b.key_group_range.start <= _group(k) <= b.key_group_range.end)
            b.set_current_key(k)
            b.get_state(both).update(f"b{k}")
            if b is live[1]:
                b.get_state(only).update(k)
        storage = CheckpointStorage(str(tmp_path / "root"), rocksdb_format="native")
        checkpoint = checkpoint_into(storage, live)
    finally:
        for b in live:
            b.close()
    heap = checkpoint.keyed_backend("op", 0, 1)
    [restored] = rocks(tmp_path, checkpoint, 1)
    try:
        in_second = sum(1 for k in range(400) if _group(k) in ranges[1])
        assert contents(restored) == contents(heap) and len(contents(heap)) == 400 + in_second
    finally:
        restored.close()


def contents(backend: Any) -> set[Any]:
    with backend.snapshot() as snap:
        states = snap.states.items()
        return {(n, e.key, e.value) for n, s in states for kg in snap.key_group_range for e in s.entries(kg)}


def _group(key: int) -> int:
    from flinkstate.state import Types, assign_to_key_group

    return assign_to_key_group(key, 128, Types.LONG())


def test_merged_sources_open_with_the_targets_options(
    tmp_path: Path, native_and_parquet: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rescale that merges opens the other subtask's files within the target's RocksDB
    options and memory (one block cache for both: one budget), not with defaults."""
    from flinkstate.state import RocksDBOptions
    from flinkstate.state.rocksdb import backend as rocksdb_backend

    written, native, _ = native_and_parquet
    options = RocksDBOptions(block_cache_bytes=8 << 20, write_buffer_bytes=1 << 20,
                             total_write_buffer_bytes=4 << 20, bulk_load_min_entries=7)  # fmt: skip
    opened: list[tuple[RocksDBOptions, Any]] = []
    directory = rocksdb_backend.DbDirectory

    def spy(path: str, given: RocksDBOptions, memory: Any) -> Any:
        opened.append((given, memory))
        return directory(path, given, memory)

    monkeypatch.setattr(rocksdb_backend, "DbDirectory", spy)
    factory = lambda **kw: RocksDBKeyedStateBackend(tmp_path / "target", options=options, **kw)  # noqa: E731
    with native.keyed_backend("op", 0, 1, backend_factory=factory, time_provider=CLOCK) as restored:
        assert everything([restored]) == Counter(written)
    assert [given for given, _ in opened] == [options, options]  # the target, then the second subtask's files
    assert opened[1][1] is opened[0][1] is restored.memory
