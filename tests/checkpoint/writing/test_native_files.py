"""Native RocksDB checkpoints by files: each SST file stored once, kept while a retained
checkpoint references it, checked on restore; a crash leaves the previous one readable.
Run on every storage (memory, local, S3)."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from native_job import (
    CLOCK,
    NAMES,
    SHORT,
    TOTAL,
    VALUE,
    commit,
    comparable,
    fill,
    native_files,
    rocks,
)

from flinkstate.checkpoint import (
    CheckpointCorruptError,
    CheckpointStorage,
    SavepointEdits,
    Storage,
    edit_checkpoint,
)
from flinkstate.checkpoint.writing import native as native_writing
from flinkstate.state import HeapKeyedStateBackend


@pytest.fixture
def uploads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every (path, bytes) uploaded by native checkpoints."""
    seen: list[tuple[str, int]] = []
    copy = native_writing._copy

    def counting(storage: Storage, path: str, local: str, sha: Any = None) -> None:
        copy(storage, path, local, sha)
        seen.append((path, storage.size(path)))

    monkeypatch.setattr(native_writing, "_copy", counting)
    return seen


def test_restores_what_parquet_restores(location: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    url, options = location
    native = CheckpointStorage(url + "/native", options, rocksdb_format="native")
    parquet = CheckpointStorage(url + "/parquet", options)
    with rocks(tmp_path) as live:
        fill(live, range(300))
        a, b = commit(native, live), commit(parquet, live)
    for factory in (lambda **kw: rocks(tmp_path, **kw), HeapKeyedStateBackend):
        from_native = a.keyed_backend("op", 0, 1, factory, time_provider=CLOCK)
        from_parquet = b.keyed_backend("op", 0, 1, factory, time_provider=CLOCK)
        try:
            assert comparable(from_native) == comparable(from_parquet)
            for backend in (from_native, from_parquet):
                backend.set_current_key("clé-5-日本")
                assert backend.get_state(VALUE).value() == 5.0
                assert backend.get_state(SHORT).value() is None  # expired
                assert dict(backend.get_map_state(NAMES).items()) == {"ü5": None, "": "leer"}
                assert backend.get_partitioned_state(("win", 1), TOTAL).get() == -5
                backend.set_current_key("clé-6-日本")
                assert backend.get_state(SHORT).value() == "kurz"  # written late: alive
        finally:
            from_native.close()
            from_parquet.close()


def test_a_second_checkpoint_uploads_only_new_files(
    location: tuple[str, dict[str, Any]], tmp_path: Path, uploads: list[tuple[str, int]]
) -> None:
    url, options = location
    storage = CheckpointStorage(url, options, rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill(live, range(5000))
        first = commit(storage, live)
        full = sum(n for p, n in uploads if p.endswith(".sst"))
        uploads.clear()
        fill(live, range(0, 5000, 100), tag="neu")  # 1% of the keys change
        second = commit(storage, live)
        model = comparable(live)
    changed = sum(n for p, n in uploads if p.endswith(".sst"))
    assert 0 < changed < 0.05 * full, (changed, full)
    # besides, the small files of RocksDB's checkpoint itself (MANIFEST, CURRENT, OPTIONS)
    others = [p for p, _ in uploads if not p.endswith(".sst")]
    assert others and all("-native-" in p and "/" not in p for p in others)
    old = {f.ref.sha256 for st in first.manifest.operators[0].subtasks for f in st.native.files if f.sst}  # type: ignore[union-attr]
    [st] = second.manifest.operators[0].subtasks
    assert st.native is not None
    shared = [f for f in st.native.files if f.sst and f.ref.sha256 in old]
    assert shared and all(f.ref.checkpoint_id == 1 for f in shared)  # referenced, not uploaded again
    assert second.manifest.incremental
    restored = second.keyed_backend("op", 0, 1, time_provider=CLOCK)
    assert comparable(restored) == model


def test_retention_keeps_shared_files_while_referenced(
    location: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    url, options = location
    storage = CheckpointStorage(url, options, retain=1, rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill(live, range(2000))
        commit(storage, live)
        first = native_files(storage)
        fill(live, range(0, 2000, 50), tag="neu")
        commit(storage, live)  # retires checkpoint 1; its SST files are still referenced
        assert first <= native_files(storage)
        for col in live._columns.values():  # every SST file rewritten: the old ones are referenced no more
            col.cf.compact_range(None, None)
        fill(live, range(1), tag="zwei")
        third = commit(storage, live)
        model = comparable(live)
    kept = native_files(storage)
    assert not first & kept
    assert kept == {
        f"_data/native/{f.ref.sha256}.sst"
        for f in third.manifest.operators[0].subtasks[0].native.files
        if f.sst
    }  # type: ignore[union-attr]
    assert storage.completed_ids() == [3]
    assert comparable(storage.load().keyed_backend("op", 0, 1, time_provider=CLOCK)) == model


@pytest.mark.parametrize("damage", ["altered", "missing"])
def test_a_damaged_sst_file_is_corrupt_naming_it(tmp_path: Path, damage: str) -> None:
    storage = CheckpointStorage(str(tmp_path / "root"), rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill(live, range(200))
        checkpoint = commit(storage, live)
    path = sorted(native_files(storage))[0]
    if damage == "missing":
        storage.storage.delete(path)
    else:
        data = bytearray(storage.storage.read_bytes(path))
        data[len(data) // 2] ^= 0xFF
        storage.storage.delete(path)
        storage.storage.write_bytes(path, bytes(data))
    name = path.rsplit("/", 1)[1]
    for factory in (lambda **kw: rocks(tmp_path, **kw), HeapKeyedStateBackend):
        with pytest.raises(CheckpointCorruptError, match=rf"\[CHECKPOINT_CORRUPT\].*{name}.*{damage}"):
            checkpoint.keyed_backend("op", 0, 1, factory)
    with pytest.raises(CheckpointCorruptError, match=name):
        list(checkpoint.read_keyed("op", "v"))


def test_a_crash_before_publishing_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    url = str(tmp_path / "root")
    storage = CheckpointStorage(url, rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill(live, range(1000))
        commit(storage, live)
        model = comparable(live)
        fill(live, range(1000), tag="neu")
        for col in live._columns.values():
            col.cf.compact_range(None, None)
        pending = storage.begin()
        pending.write_subtask("op", 0, 1, 128, keyed=live).result()  # uploaded, never published: a crash
    assert len(native_files(storage)) > 1
    after = CheckpointStorage(url, rocksdb_format="native")  # the next run
    assert after.latest_id() == 1
    assert comparable(after.load().keyed_backend("op", 0, 1, time_provider=CLOCK)) == model
    gone = after.cleanup(older_than=timedelta(0), allow_short_grace=True)  # the attempt's orphans go
    assert any(p.startswith("_data/native/") for p in gone.deleted)
    assert comparable(after.load().keyed_backend("op", 0, 1, time_provider=CLOCK)) == model


def test_a_failed_upload_aborts_and_keeps_the_previous(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = CheckpointStorage(str(tmp_path / "root"), rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill(live, range(500))
        commit(storage, live)
        model = comparable(live)
        fill(live, range(500), tag="neu")

        def broken(storage: Storage, path: str, local: str, sha: Any = None) -> None:
            raise OSError("connection reset")

        monkeypatch.setattr(native_writing, "_copy", broken)
        pending = storage.begin()
        pending.write_subtask("op", 0, 1, 128, keyed=live)
        with pytest.raises(OSError, match="connection reset"):
            pending.commit()
    assert storage.completed_ids() == [1]
    assert comparable(storage.load().keyed_backend("op", 0, 1, time_provider=CLOCK)) == model


def test_after_a_restore_of_an_older_checkpoint_stored_files_are_not_written_again(
    location: tuple[str, dict[str, Any]], tmp_path: Path, uploads: list[tuple[str, int]]
) -> None:
    url, options = location
    storage = CheckpointStorage(url, options, rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill(live, range(800))
        first = commit(storage, live)
        model = comparable(live)
        fill(live, range(800), tag="neu")
        for col in live._columns.values():
            col.cf.compact_range(None, None)
        commit(storage, live)  # the latest references none of the first's SST files
    factory = lambda **kw: rocks(tmp_path, **kw)  # noqa: E731
    with first.keyed_backend("op", 0, 1, factory, time_provider=CLOCK) as restored:
        uploads.clear()
        third = commit(storage, restored)
    assert [p for p, _ in uploads if p.endswith(".sst")] == []  # the first's files, in place already
    ssts = {f.ref.sha256 for st in third.manifest.operators[0].subtasks if st.native for f in st.native.files}
    assert ssts >= {
        f.ref.sha256
        for st in first.manifest.operators[0].subtasks
        if st.native
        for f in st.native.files
        if f.sst
    }
    assert comparable(storage.load().keyed_backend("op", 0, 1, time_provider=CLOCK)) == model


def test_an_edited_native_checkpoint_holds_its_own_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``edit_checkpoint`` copies native files too: the edited savepoint restores the same
    entries once the source checkpoints are gone; files are streamed, none read whole."""
    read_whole: list[str] = []
    read_bytes = Storage.read_bytes

    def recording(self: Storage, relative: str) -> bytes:
        read_whole.append(relative)
        return read_bytes(self, relative)

    monkeypatch.setattr(Storage, "read_bytes", recording)
    storage = CheckpointStorage(str(tmp_path / "cp"), rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill(live, range(300))
        source = commit(storage, live)
        expected = comparable(live)
    edited = edit_checkpoint(source, str(tmp_path / "edited"), SavepointEdits().rename_operator("op", "op2"))
    assert [p for p in read_whole if "native" in p] == []
    shutil.rmtree(tmp_path / "cp")
    for factory in (lambda **kw: rocks(tmp_path, **kw), HeapKeyedStateBackend):
        with edited.keyed_backend("op2", 0, 1, factory, time_provider=CLOCK) as restored:
            assert comparable(restored) == expected
