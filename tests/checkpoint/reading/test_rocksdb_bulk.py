"""Bulk-loaded restores into RocksDB (sorted SST files, ingested) against restores by puts.

Contract: for every restore (Parquet → RocksDB, heap → RocksDB, rescales, chains of
increments with deletes, type migration) the DB a bulk load leaves holds the very bytes the
put path leaves, state by state: keys (key group | key | namespace | user key or list
sequence), values and TTL timestamps; and both read back as the model (a heap restore).
"""

from __future__ import annotations

import datetime
import math
import os
import struct
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import dump
from incremental_ops import Workload
from rescale_job import CLOCK, entries, write_initial
from test_migrate import NEW_ROW, _checkpoint, _old_types

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, open_checkpoint
from flinkstate.state import (
    HeapKeyedStateBackend,
    KeyGroupRange,
    ListStateDescriptor,
    MapStateDescriptor,
    RocksDBKeyedStateBackend,
    RocksDBOptions,
    StateAccessError,
    StateKind,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.keyed.snapshot import StateColumns, StateMetaInfo
from flinkstate.state.rocksdb import bulk, column
from flinkstate.state.rocksdb.options import RocksDBMemory
from flinkstate.state.ttl.time import ManualTimeProvider

BULK = RocksDBOptions(bulk_load_min_entries=1)
PUTS = RocksDBOptions(bulk_load_min_entries=1 << 40)
Raw = dict[str, list[tuple[bytes, bytes]]]


def raw(backend: RocksDBKeyedStateBackend) -> Raw:
    """Every state's entries as RocksDB holds them (key bytes, value bytes), in key order."""
    return {name: list(col.iter_all()) for name, col in sorted(backend._columns.items())}


def memtable_entries(backend: RocksDBKeyedStateBackend) -> int:
    return sum(
        int(col.view().property_int_value("rocksdb.num-entries-active-mem-table") or 0)
        for col in backend._columns.values()
    )


def restore_both(
    checkpoint: CompletedCheckpoint, p: int, root: Path, **backend_args: Any
) -> list[tuple[RocksDBKeyedStateBackend, RocksDBKeyedStateBackend]]:
    """Each subtask of ``p`` restored twice: bulk-loaded and by puts."""
    out = []
    for i in range(p):
        pair = []
        for opts in (BULK, PUTS):
            path = root / f"{i}-{uuid.uuid4().hex[:8]}"

            def factory(path: Path = path, opts: RocksDBOptions = opts, **kw: Any) -> Any:
                return RocksDBKeyedStateBackend(path, options=opts, **kw)

            pair.append(checkpoint.keyed_backend("op", i, p, backend_factory=factory, **backend_args))
        out.append((pair[0], pair[1]))
    return out


def canon(*dumps: dict[Any, Any]) -> dict[Any, str]:
    """Dumps merged, values compared by repr (NaN equals NaN, -0.0 is not 0.0), maps sorted."""
    out = {}
    for d in dumps:
        for k, (value, ts) in d.items():
            value = sorted(value.items(), key=repr) if isinstance(value, dict) else value
            out[k] = repr((value, ts))
    return out


def check_same(pairs: list[tuple[RocksDBKeyedStateBackend, RocksDBKeyedStateBackend]]) -> None:
    loaded = 0
    for bulk_b, puts_b in pairs:
        assert raw(bulk_b) == raw(puts_b)
        assert memtable_entries(bulk_b) == 0  # everything came in as files
        assert memtable_entries(puts_b) == sum(len(e) for e in raw(puts_b).values())
        assert not os.listdir(os.path.join(bulk_b.path, "ingest"))  # no file left behind
        loaded += sum(len(e) for e in raw(bulk_b).values())
    assert loaded > 0


def close(pairs: list[tuple[RocksDBKeyedStateBackend, RocksDBKeyedStateBackend]]) -> None:
    for pair in pairs:
        for b in pair:
            b.close()


@pytest.mark.parametrize("p", [1, 5])
def test_every_state_kind_rescaled_from_three_subtasks(tmp_path: Path, p: int) -> None:
    written, checkpoint = write_initial(f"memory://bulk/{uuid.uuid4().hex}")
    pairs = restore_both(checkpoint, p, tmp_path, time_provider=CLOCK)
    try:
        check_same(pairs)
        for b in (pair[0] for pair in pairs):
            assert b.state_names()  # every state restored, even in subtasks without entries
        assert Counter(e for pair in pairs for e in entries(pair[0])) == Counter(written)
    finally:
        close(pairs)


def test_a_checkpoint_written_by_rocksdb_restores_into_rocksdb(tmp_path: Path) -> None:
    url = f"memory://bulk/{uuid.uuid4().hex}"
    written, checkpoint = write_initial(url)

    def bulk_backend(**kw: Any) -> RocksDBKeyedStateBackend:
        return RocksDBKeyedStateBackend(tmp_path / uuid.uuid4().hex, options=BULK, **kw)

    first = [checkpoint.keyed_backend("op", i, 2, bulk_backend, time_provider=CLOCK) for i in range(2)]
    try:
        pending = CheckpointStorage(url).begin()
        for i, b in enumerate(first):
            pending.write_subtask("op", i, 2, 128, keyed=b)
        second = pending.commit()
    finally:
        for b in first:
            b.close()
    pairs = restore_both(second, 3, tmp_path, time_provider=CLOCK)
    try:
        check_same(pairs)
        assert Counter(e for pair in pairs for e in entries(pair[0])) == Counter(written)
    finally:
        close(pairs)


SPECIAL = ValueStateDescriptor("special", Types.DOUBLE())
NOTES = ListStateDescriptor("notes", Types.STRING())
BOOK = MapStateDescriptor("book", Types.STRING(), Types.DOUBLE())
TTL_NOTE = ValueStateDescriptor("ttl_note", Types.STRING())
TTL_NOTE.enable_time_to_live(StateTtlConfig.new_builder(datetime.timedelta(hours=1)).build())
DOUBLES = [float("nan"), -0.0, 0.0, float("inf"), None, 1e-300]


def _special(backend: HeapKeyedStateBackend, clock: ManualTimeProvider) -> None:
    for k in range(400):
        key = f"ключ-{k}-🔑"
        backend.set_current_key(key)
        clock.now = 10_000 + k
        backend.get_state(SPECIAL).update(DOUBLES[k % len(DOUBLES)])
        backend.get_list_state(NOTES).add_all([f"é{k}", "", f"{k}"][: 1 + k % 3])
        backend.get_map_state(BOOK).put_all({"": DOUBLES[k % len(DOUBLES)], f"ü{k}": -0.0, "z": None})
        backend.get_state(TTL_NOTE).update(f"t{k}")
        if k % 4 == 0:
            backend.get_partitioned_state(("w", k % 3), NOTES).add_all(["b", "a"])
            backend.get_partitioned_state(("w", k % 3), SPECIAL).update(-0.0)


def test_unicode_nan_negative_zero_none_and_ttl(tmp_path: Path) -> None:
    clock = ManualTimeProvider(10_000)
    heap = HeapKeyedStateBackend(key_type=Types.STRING(), max_parallelism=32, time_provider=clock)
    _special(heap, clock)
    pending = CheckpointStorage(str(tmp_path / "cp")).begin()
    pending.write_keyed("op", heap)
    checkpoint = pending.commit()
    pairs = restore_both(checkpoint, 2, tmp_path, time_provider=clock)
    try:
        check_same(pairs)

        def at(k: int) -> RocksDBKeyedStateBackend:
            key = f"ключ-{k}-🔑"
            b = next(b for b, _ in pairs if assign_to_key_group(key, 32, Types.STRING()) in b.key_group_range)
            b.set_current_key(key)
            return b

        assert math.isnan(at(6).get_state(SPECIAL).value())
        b = at(4)
        assert b.get_state(SPECIAL).value() is None
        assert list(b.get_list_state(NOTES).get()) == ["é4", ""]
        assert dict(b.get_map_state(BOOK).items()) == {"": None, "ü4": -0.0, "z": None}
        assert math.copysign(1, b.get_map_state(BOOK).get("ü4")) == -1
        assert b.get_state(TTL_NOTE).value() == "t4"
        assert list(b.get_partitioned_state(("w", 1), NOTES).get()) == ["b", "a"]  # list order kept
        assert canon(*(dump(b) for b, _ in pairs)) == canon(dump(heap))
    finally:
        close(pairs)


def test_chain_of_increments_with_deletes_rescaled_two_to_three(tmp_path: Path) -> None:
    """Two subtasks checkpoint incrementally (deletes, clears, TTL expiry between the
    checkpoints); each key group of the last increment merges a base and delta files."""
    clock = ManualTimeProvider(1_000)
    max_p = 32
    storage = CheckpointStorage(str(tmp_path / "incr"), retain=5, incremental=True)
    heaps = []
    works = []
    for i in range(2):
        rng = KeyGroupRange(16 * i, 16 * i + 15)
        heaps.append(HeapKeyedStateBackend(max_parallelism=max_p, key_group_range=rng, time_provider=clock))
        keys = [k for k in range(4_000) if assign_to_key_group(k, max_p) in rng][:60]
        works.append(Workload(7 + i, keys, clock))
    checkpoint: CompletedCheckpoint | None = None
    for _ in range(4):
        for heap, work in zip(heaps, works, strict=True):
            work.run(heap, 300)
        pending = storage.begin()
        for i, heap in enumerate(heaps):
            pending.write_keyed("op", heap, subtask=i, parallelism=2)
        checkpoint = pending.commit()
        for heap in heaps:
            heap.notify_checkpoint_complete(checkpoint.checkpoint_id)
    assert checkpoint is not None and checkpoint.manifest.incremental
    assert any(f.delta for f in checkpoint.manifest.files())
    pairs = restore_both(checkpoint, 3, tmp_path, time_provider=clock)
    try:
        check_same(pairs)
        model: dict[Any, Any] = {}
        for i in range(3):
            model |= dump(checkpoint.keyed_backend("op", i, 3, time_provider=clock))
        assert {k: v for b, _ in pairs for k, v in dump(b).items()} == model
    finally:
        close(pairs)


def test_type_migration_of_restored_state(tmp_path: Path) -> None:
    checkpoint = open_checkpoint(_checkpoint(tmp_path / "root", _old_types))
    pairs = restore_both(checkpoint, 1, tmp_path)
    try:
        for b in pairs[0]:
            b.get_state(ValueStateDescriptor("int", Types.LONG()))
            b.get_state(ValueStateDescriptor("row", NEW_ROW))
            b.get_list_state(ListStateDescriptor("rows", NEW_ROW))
            b.get_map_state(MapStateDescriptor("map", Types.LONG(), NEW_ROW))
        check_same(pairs)
        b = pairs[0][0]
        b.set_current_key(7)
        assert b.get_map_state(MapStateDescriptor("map", Types.LONG(), NEW_ROW)).get(7) == (7, None)
        assert list(b.get_list_state(ListStateDescriptor("rows", NEW_ROW)).get()) == [(7, None)]
    finally:
        close(pairs)


def test_a_key_group_restored_twice_keeps_the_later_values(tmp_path: Path) -> None:
    """A load over entries already in the DB (overlapping files, memtable): later wins."""
    meta = StateMetaInfo("v", StateKind.VALUE, Types.LONG())
    kg = assign_to_key_group(5, 128)
    keys = [k for k in range(2_000) if assign_to_key_group(k, 128) == kg]
    results = []
    for opts in (BULK, PUTS, RocksDBOptions(bulk_load_min_entries=len(keys))):
        with RocksDBKeyedStateBackend(tmp_path / uuid.uuid4().hex, key_type=Types.LONG(), options=opts) as b:
            b.restore_state(meta, kg, StateColumns(keys[:-1], None, [1] * (len(keys) - 1)))
            b.restore_state(meta, kg, StateColumns(keys[1:] + keys[1:2], None, list(range(len(keys)))))
            results.append(raw(b))
            b.set_current_key(keys[1])
            assert b.get_state(ValueStateDescriptor("v", Types.LONG())).value() == len(keys) - 1
            b.set_current_key(keys[0])
            assert b.get_state(ValueStateDescriptor("v", Types.LONG())).value() == 1
    assert results[0] == results[1] == results[2]


class _FailingColumnFamily:
    def ingest_external_file(self, paths: list[str], opts: Any) -> None:
        assert all(os.path.exists(p) for p in paths)
        raise Exception("No space left on device")  # what rocksdict raises


def test_a_failed_ingestion_is_typed_and_leaves_no_file(tmp_path: Path) -> None:
    _, cf_options = RocksDBOptions().build(RocksDBMemory(RocksDBOptions()))
    path = str(tmp_path / "x.sst")
    with pytest.raises(StateAccessError, match=r"\[BULK_LOAD_FAILED\].*No space left"):
        bulk.ingest(_FailingColumnFamily(), cf_options, lambda: path, {b"b": b"2", b"a": b"1"})
    assert not os.path.exists(path)


@pytest.mark.parametrize("per_file", [7, 1 << 22])
def test_ingest_writes_a_dict_in_key_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_file: int
) -> None:
    """A load's dict, in any order, becomes sorted files (one, or several of ``per_file``
    entries, ingested together): the DB reads back the dict, and no file is left."""
    import random

    import rocksdict

    db_options, cf_options = RocksDBOptions().build(RocksDBMemory(RocksDBOptions()))
    db = rocksdict.Rdict(str(tmp_path / "db"), db_options)
    try:
        rnd = random.Random(3)
        puts = {rnd.randbytes(rnd.randint(1, 6)): rnd.randbytes(3) for _ in range(500)}
        puts[b"\x00"], puts[b"\xff"] = b"", b"last"
        assert list(puts) != sorted(puts)
        monkeypatch.setattr(bulk, "FILE_ENTRIES", per_file)
        paths = (str(tmp_path / f"{i}.sst") for i in range(1000))
        bulk.ingest(db, cf_options, lambda: next(paths), puts)
        assert list(db.items()) == sorted(puts.items())
        assert [f for f in os.listdir(tmp_path) if f.endswith(".sst")] == []
        files = [f for f in db.live_files() if f["size"]]
        assert len(files) == (1 if per_file > len(puts) else -(-len(puts) // per_file))
    finally:
        db.close()


@pytest.mark.parametrize(("options", "per_file"), [(PUTS, 1 << 22), (BULK, 1 << 22), (BULK, 5)])
def test_copied_key_groups_are_the_sources_stored_entries_in_the_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: RocksDBOptions, per_file: int
) -> None:
    """A merging rescale's copy (:meth:`copy_key_groups`) adds exactly the source's stored
    entries of the key groups asked (first and last included, none beside them) to what the
    target holds, by write batches (read a chunk at a time) or by files (one or several),
    every state kind."""
    monkeypatch.setattr(bulk, "FILE_ENTRIES", per_file)
    monkeypatch.setattr(column, "LOAD_CHUNK", 7)  # write batches of 7 entries read at a time
    ttl = StateTtlConfig.new_builder(datetime.timedelta(hours=1)).build()
    value = ValueStateDescriptor("v", Types.STRING())
    value.enable_time_to_live(ttl)
    lists = ListStateDescriptor("l", Types.LONG())
    maps = MapStateDescriptor("m", Types.STRING(), Types.DOUBLE())

    def filled(path: Path, keys: range) -> RocksDBKeyedStateBackend:
        b = RocksDBKeyedStateBackend(path, key_type=Types.LONG(), options=options, time_provider=CLOCK)
        for k in keys:
            b.set_current_key(k)
            b.get_state(value).update(f"ü{k}" if k % 3 else None)
            b.get_list_state(lists).update([k, -k])
            b.get_map_state(maps).put_all({"a": k / 2, "ß": math.nan})
        return b

    with (
        filled(tmp_path / "source", range(0, 600)) as source,
        filled(tmp_path / "target", range(600, 900)) as target,
    ):
        before, stored = raw(target), raw(source)
        wanted = KeyGroupRange(30, 70)
        target.copy_key_groups(source, wanted)
        after = raw(target)
        group_of = {source._key_codec.absolute[kg]: kg for kg in range(128)}  # the key's first bytes
    width = len(next(iter(group_of)))
    for name in after:
        copied = [(k, v) for k, v in stored[name] if group_of[k[:width]] in wanted]
        assert {group_of[k[:width]] for k, _ in copied} >= {wanted.start, wanted.end}
        assert after[name] == sorted(before[name] + copied), name


def test_a_bounded_read_keeps_its_bound_while_it_is_read(tmp_path: Path) -> None:
    """The range's end stays alive as long as the read (RocksDB holds a pointer to it, and
    the caller may hold the end nowhere else): memory reused meanwhile, by the very keys
    read, neither stops the read early nor carries it past the end."""
    import rocksdict

    options = RocksDBOptions()
    db_options, _ = options.build(RocksDBMemory(options))
    db = rocksdict.Rdict(str(tmp_path / "db"), db_options)
    try:
        keys = [struct.pack(">HQ", i % 128, i) for i in range(20_000)]
        for key in keys:
            db[key] = b"v"
        for begin, end in ((10, 100), (0, 1), (126, 128)):
            wanted = [(k, b"v") for k in sorted(keys) if begin <= k[1] < end]
            for _ in range(3):  # each end a new object, which only the read refers to
                read = bulk.stored_between(db, struct.pack(">H", begin), struct.pack(">H", end))
                reused = [struct.pack(">H", begin) for _ in range(100)]  # where a freed end was
                assert list(read) == wanted
                del reused
    finally:
        db.close()
