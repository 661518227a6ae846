"""Uploading a native snapshot's SST files: each byte is hashed once (the digest that names
the file), the copy is checked against what was hashed, and a file that changed in between
is refused with nothing left under its name. Run on every storage (memory, local, S3)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from native_job import CLOCK, commit, comparable, fill, native_files, rocks

from flinkstate.checkpoint import CheckpointError, CheckpointStorage, Storage
from flinkstate.checkpoint.writing import native as native_writing
from flinkstate.state.rocksdb import native as state_native
from flinkstate.state.rocksdb.native import NativeSnapshot


class Hashed:
    """Counts the bytes fed to every SHA-256 the native snapshot and its writer make."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bytes = 0
        real, hashed = hashlib.sha256, self

        class Counting:
            def __init__(self, data: bytes = b"") -> None:
                self.sha = real()
                self.update(data)

            def update(self, data: bytes) -> None:
                hashed.bytes += len(data)
                self.sha.update(data)

            def hexdigest(self) -> str:
                return self.sha.hexdigest()

        for module in (state_native, native_writing):
            monkeypatch.setattr(module, "hashlib", SimpleNamespace(sha256=Counting))


def test_each_uploaded_byte_is_hashed_once(
    location: tuple[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, options = location
    storage = CheckpointStorage(url, options, rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill(live, range(3000))
        hashed = Hashed(monkeypatch)
        checkpoint = commit(storage, live)
        model = comparable(live)
    monkeypatch.undo()
    [st] = checkpoint.manifest.operators[0].subtasks
    assert st.native is not None
    uploaded = sum(f.ref.size for f in st.native.files)
    assert hashed.bytes == uploaded > 0
    for f in st.native.files:  # every stored file has the digest its manifest gives
        path = os.path.normpath(os.path.join(f"chk-{checkpoint.checkpoint_id}", f.ref.path))
        assert hashlib.sha256(storage.storage.read_bytes(path)).hexdigest() == f.ref.sha256
    assert comparable(checkpoint.keyed_backend("op", 0, 1, time_provider=CLOCK)) == model


class FirstFresh:
    """Patches ``NativeSnapshot.digest``: the first SST file a checkpoint hashes itself (not
    remembered from an earlier one) is ``name``, with its digest ``digest``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, before: Any = None, after: Any = None) -> None:
        self.name = self.digest = ""
        digest_of, first = NativeSnapshot.digest, self

        def digest(snapshot: NativeSnapshot, name: str) -> str:
            if first.name or name in snapshot.digests:
                return digest_of(snapshot, name)
            first.name = name
            if before is not None:
                before(snapshot, name)
            first.digest = digest_of(snapshot, name)
            if after is not None:
                after(snapshot.path(name))
            return first.digest

        monkeypatch.setattr(NativeSnapshot, "digest", digest)


def _rewrite(path: str) -> None:
    """Change one byte of ``path`` in place, keeping its size; its modification time moves
    on (by a second, so a coarse clock cannot hide the write)."""
    before = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(before.st_size // 2)
        byte = f.read(1)
        f.seek(before.st_size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))


def _rewritten_after_hashing(monkeypatch: pytest.MonkeyPatch) -> FirstFresh:
    return FirstFresh(monkeypatch, after=_rewrite)


def _rewritten_while_copied(monkeypatch: pytest.MonkeyPatch) -> FirstFresh:
    first, copy = FirstFresh(monkeypatch), native_writing._copy

    def copying(storage: Any, path: str, local: str, sha: Any = None) -> None:
        copy(storage, path, local, sha)
        if first.name and local.endswith(first.name) and path.endswith(".sst"):
            _rewrite(local)

    monkeypatch.setattr(native_writing, "_copy", copying)
    return first


def _misremembered(monkeypatch: pytest.MonkeyPatch) -> FirstFresh:
    def remember(snapshot: NativeSnapshot, name: str) -> None:
        snapshot.digests[name] = "0" * 64  # a digest known from elsewhere, not the file's

    return FirstFresh(monkeypatch, before=remember)


@pytest.mark.parametrize("spoil", [_rewritten_after_hashing, _rewritten_while_copied, _misremembered])
def test_a_copy_not_of_the_hashed_bytes_is_refused_and_removed(
    location: tuple[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spoil: Any
) -> None:
    url, options = location
    storage = CheckpointStorage(url, options, rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill(live, range(300))
        commit(storage, live)
        model = comparable(live)
        fill(live, range(300), tag="neu")
        first = spoil(monkeypatch)
        pending = storage.begin()
        pending.write_subtask("op", 0, 1, 128, keyed=live)
        with pytest.raises(CheckpointError, match=rf"\[WRITE_FAILED\].*{first.name} changed while"):
            pending.commit()
        monkeypatch.undo()
    assert first.digest and f"_data/native/{first.digest}.sst" not in native_files(storage)
    assert storage.completed_ids() == [1]
    assert comparable(storage.load().keyed_backend("op", 0, 1, time_provider=CLOCK)) == model


def test_a_file_the_db_unlinks_meanwhile_is_still_copied_unhashed(
    location: tuple[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The live DB compacting away its own link to a file the snapshot holds changes the
    file's change time, not its bytes: the upload goes on, hashing nothing twice."""
    url, options = location
    storage = CheckpointStorage(url, options, rocksdb_format="native")

    def relinked(path: str) -> None:
        os.link(path, path + ".other")
        os.unlink(path + ".other")

    with rocks(tmp_path) as live:
        fill(live, range(300))
        first = FirstFresh(monkeypatch, after=relinked)
        hashed = Hashed(monkeypatch)
        checkpoint = commit(storage, live)
        model = comparable(live)
    monkeypatch.undo()
    [st] = checkpoint.manifest.operators[0].subtasks
    assert st.native is not None and first.name in {f.name for f in st.native.files}
    assert hashed.bytes == sum(f.ref.size for f in st.native.files)
    assert comparable(checkpoint.keyed_backend("op", 0, 1, time_provider=CLOCK)) == model


def test_a_refused_copy_that_cannot_be_removed_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = CheckpointStorage(str(tmp_path / "root"), rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill(live, range(300))
        first = _misremembered(monkeypatch)

        def failing(self: Storage, relative: str) -> None:
            raise OSError("permission denied")

        monkeypatch.setattr(Storage, "delete", failing)
        pending = storage.begin()
        pending.write_subtask("op", 0, 1, 128, keyed=live)
        left = r"\[WRITE_FAILED\].*changed while.*is left: permission denied"
        with pytest.raises(CheckpointError, match=left):
            pending.commit()
        monkeypatch.undo()
    assert first.name and storage.completed_ids() == []
