"""Bounded memory for large Parquet checkpoints: data files streamed into the storage as they
are written (the same bytes and manifest as a file written in memory), large files verified
streamed on restore and read by ranges, RocksDB snapshots read in chunks and restores
applied in slices (the same state as the model)."""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from checkpoint_data import dump
from incremental_ops import Workload
from rescale_job import CLOCK, KEY_TYPE, entries, fill_subtask, write_initial

from flinkstate.checkpoint import (
    CheckpointCorruptError,
    CheckpointStorage,
    CompletedCheckpoint,
    Storage,
    parquet_files,
)
from flinkstate.checkpoint.format import write_keyed
from flinkstate.checkpoint.parquet_files import FileSink, read_footer
from flinkstate.checkpoint.reading import merge, verified
from flinkstate.state import HeapKeyedStateBackend, RocksDBKeyedStateBackend
from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.rocksdb import snapshot as rocksdb_snapshot
from flinkstate.state.ttl.time import ManualTimeProvider


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every bound tiny: files spill after 1 KiB keeping 64 bytes of their end (footers are
    read back), every file is verified streamed, snapshots read 3 entries at a time, and
    restores apply a row at a time."""
    monkeypatch.setattr(parquet_files, "SPILL", 1024)
    monkeypatch.setattr(parquet_files, "TAIL", 64)
    monkeypatch.setattr(verified, "WHOLE_MAX", 0)
    monkeypatch.setattr(rocksdb_snapshot, "CHUNK", 3)
    monkeypatch.setattr(merge, "RESTORE_SLICE", 1)


@pytest.mark.parametrize(("spill", "tail"), [(1024, 64), (1024, 1 << 20), (1 << 30, 1 << 20)])
def test_streamed_file_is_the_file_written_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spill: int, tail: int
) -> None:
    monkeypatch.setattr(parquet_files, "SPILL", spill)
    monkeypatch.setattr(parquet_files, "TAIL", tail)
    storage = Storage(str(tmp_path))
    keyed, _ = fill_subtask(0)
    with keyed.snapshot() as snap:
        for i, (name, state) in enumerate(snap.states.items()):
            model = write_keyed(state, KEY_TYPE, snap.key_group_range)
            sink = FileSink(storage, f"f{i}.parquet")
            streamed = write_keyed(state, KEY_TYPE, snap.key_group_range, sink)
            data = (tmp_path / f"f{i}.parquet").read_bytes()
            assert sink.kept and streamed.data is None
            assert data == model.data, name
            assert streamed.size == model.size == len(data)
            assert streamed.sha256 == model.sha256 == hashlib.sha256(data).hexdigest()
            assert (
                streamed.footer_sha256
                == model.footer_sha256
                == read_footer(pa.BufferReader(data), len(data))[1]
            )
            assert (streamed.rows, streamed.key_groups) == (model.rows, model.key_groups)
            assert model.rows and len(model.key_groups) > 1
        state = next(iter(snap.states.values()))
        sink = FileSink(storage, "empty.parquet")
        empty = write_keyed(state, KEY_TYPE, [], sink)
        assert (empty.rows, sink.kept, (tmp_path / "empty.parquet").exists()) == (0, False, False)


def test_checkpoint_of_streamed_files_restores_the_same_state(tmp_path: Path, small: None) -> None:
    written, first = write_initial(str(tmp_path / "root"))
    manifest = first.manifest.operators[0]
    for subtask in manifest.subtasks:
        for refs in subtask.keyed.values():
            for ref in refs:
                data = (tmp_path / "root" / f"chk-{first.checkpoint_id}" / ref.path).read_bytes()
                assert (ref.size, ref.sha256) == (len(data), hashlib.sha256(data).hexdigest())
                assert ref.footer_sha256 == read_footer(pa.BufferReader(data), len(data))[1]
    restored = [first.keyed_backend("op", i, 2, time_provider=CLOCK) for i in range(2)]
    assert Counter(e for b in restored for e in entries(b)) == Counter(written)


def _keyed_file(checkpoint: CompletedCheckpoint, root: Path) -> Path:
    ref = next(r for st in checkpoint.manifest.operators[0].subtasks for rs in st.keyed.values() for r in rs)
    return root / f"chk-{checkpoint.checkpoint_id}" / ref.path


def test_large_files_are_verified_streamed_never_read_whole(
    tmp_path: Path, small: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, checkpoint = write_initial(str(tmp_path))
    whole: list[str] = []
    read_bytes = Storage.read_bytes
    monkeypatch.setattr(Storage, "read_bytes", lambda s, p: whole.append(p) or read_bytes(s, p))
    checkpoint.keyed_backend("op", 0, 1, time_provider=CLOCK).close()
    assert not [p for p in whole if "-k-" in p]  # keyed files: streamed, then read by ranges

    path = _keyed_file(checkpoint, tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # a flipped bit in a page: the file's SHA-256 catches it
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointCorruptError, match=rf"\[CHECKPOINT_CORRUPT\].*{path.name}.*checksum"):
        checkpoint.keyed_backend("op", 0, 1, time_provider=CLOCK)
    path.unlink()
    with pytest.raises(CheckpointCorruptError, match=rf"\[CHECKPOINT_CORRUPT\].*{path.name} is missing"):
        checkpoint.keyed_backend("op", 0, 1, time_provider=CLOCK)


def _joined(chunks: list[StateColumns]) -> tuple[Any, ...]:
    keys = [k for c in chunks for k in c.keys]
    namespaces = [n for c in chunks for n in (c.namespaces or [None] * len(c))]
    stamps = [t for c in chunks for t in (c.timestamps or [None] * len(c))]
    return keys, namespaces, [v for c in chunks for v in c.values], stamps


def test_rocksdb_snapshot_chunks_are_its_key_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every state kind (VALUE, LIST, MAP with TTL, namespaces) read 3 entries at a time, so
    lists and maps of several entries straddle chunks: the chunks joined are the key group."""
    _, checkpoint = write_initial(str(tmp_path / "root"))
    factory = lambda **kw: RocksDBKeyedStateBackend(tmp_path / "db", **kw)  # noqa: E731
    with checkpoint.keyed_backend("op", 0, 1, backend_factory=factory, time_provider=CLOCK) as rocks:
        with rocks.snapshot() as snap:
            whole = {(n, kg): s.columns(kg) for n, s in snap.states.items() for kg in snap.key_group_range}
            for (name, kg), columns in whole.items():  # single-entry states: as grouped ones
                state: Any = snap.states[name]
                if state._col.layout.single:
                    prefix = state._col.keys.absolute[kg]
                    grouped = state._decode(state._col.groups(state._entries(prefix, prefix)))
                    assert _joined([grouped]) == _joined([columns]), (name, kg)
            monkeypatch.setattr(rocksdb_snapshot, "CHUNK", 3)
            split = set()
            for (name, kg), columns in whole.items():
                chunks = list(snap.states[name].column_chunks(kg))
                assert all(len(c) for c in chunks)
                assert _joined(chunks) == _joined([columns]), (name, kg)
                if len(chunks) > 1:
                    split.add(name)
            assert list(snap.states["map"].column_chunks(snap.key_group_range.end + 1)) == []
        assert sum(len(c) for c in whole.values()) > 100
        assert {"map", "list", "value"} <= split


@pytest.mark.parametrize("target", ["rocksdb", "heap"])
def test_sliced_restores_of_increments_with_deletes_are_the_model(
    tmp_path: Path, small: None, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random operations over every kind (TTL, deletes, namespaces), checkpointed as increments
    over a full one, restored in slices into RocksDB (and back out of its chunked snapshot)."""
    clock = ManualTimeProvider(1_000)
    heap = HeapKeyedStateBackend(max_parallelism=32, time_provider=clock)
    work = Workload(7, list(range(60)), clock)
    storage = CheckpointStorage(str(tmp_path / "root"), retain=3, incremental=True)
    for ops in (600, 40, 40):
        work.run(heap, ops)
        pending = storage.begin()
        pending.write_keyed("op", heap)
        checkpoint = pending.commit()
    model = dump(heap)
    assert any(
        len(refs) > 1 for st in checkpoint.manifest.operators[0].subtasks for refs in st.keyed.values()
    )
    factory: Any = HeapKeyedStateBackend
    factory_class: Any = HeapKeyedStateBackend if target == "heap" else RocksDBKeyedStateBackend
    if target == "rocksdb":
        factory = lambda **kw: RocksDBKeyedStateBackend(tmp_path / f"db-{uuid.uuid4().hex[:6]}", **kw)  # noqa: E731
    calls: list[tuple[str, int]] = []
    restore_state = factory_class.restore_state
    monkeypatch.setattr(
        factory_class,
        "restore_state",
        lambda b, meta, kg, cols: calls.append((meta.name, kg)) or restore_state(b, meta, kg, cols),
    )
    restored = checkpoint.keyed_backend("op", 0, 1, backend_factory=factory, time_provider=clock)
    assert dump(restored) == model
    assert len(calls) > len(set(calls))  # key groups applied in slices
    pending = CheckpointStorage(str(tmp_path / "again")).begin()
    pending.write_keyed("op", restored)
    again = pending.commit()
    restored.close()
    assert dump(again.keyed_backend("op", 0, 1, time_provider=clock)) == model


def test_memory_is_given_back_after_large_row_groups_and_closed_dbs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flinkstate.state.rocksdb import directory

    trims: list[str] = []
    monkeypatch.setattr(parquet_files, "trim_heap", lambda: trims.append("row group"))
    monkeypatch.setattr(directory, "trim_heap", lambda: trims.append("db"))
    monkeypatch.setattr(parquet_files, "RELEASE_ROWS", 3)
    schema = pa.schema([pa.field("key_group", pa.int32(), nullable=False), pa.field("v", pa.int64())])
    tables = [
        (kg, pa.table({"key_group": [kg] * n, "v": range(n)}, schema=schema)) for kg, n in [(0, 2), (1, 3)]
    ]
    parquet_files.write_row_groups(schema, tables)
    assert trims == ["row group"]  # the one row group of at least RELEASE_ROWS rows
    RocksDBKeyedStateBackend(tmp_path / "db", max_parallelism=8).close()
    assert trims == ["row group", "db"]
