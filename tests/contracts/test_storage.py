"""The storage contract: what the checkpoint layer asks of a filesystem (reads, ranged reads,
listings, deletes, exclusive creates, pickling). Runs on every storage (``location``: each of
``support.storages.STORAGES``, ``memory://``, a local directory and S3 on the loopback server);
so does every test that takes ``location`` (the commit protocol, retention, native files, ...)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointExistsError, CheckpointNotFoundError, Storage


@pytest.fixture
def storage(location: tuple[str, dict[str, Any]]) -> Storage:
    return Storage(*location)


def test_write_read_list_delete(storage: Storage) -> None:
    storage.write_bytes("a/one.bin", b"1" * 10)
    storage.write_bytes("a/b/two.bin", b"22")
    assert storage.exists("a/one.bin") and not storage.exists("a/none.bin")
    assert storage.read_bytes("a/one.bin") == b"1" * 10
    assert storage.size("a/b/two.bin") == 2
    assert storage.list_dir("a") == ["b", "one.bin"]
    assert sorted(storage.walk_files("a")) == ["a/b/two.bin", "a/one.bin"]
    storage.delete("a/one.bin")
    assert not storage.exists("a/one.bin")
    storage.delete("a")
    assert list(storage.walk_files()) == [] and storage.list_dir("nothing") == []
    storage.delete("never-existed")


def test_missing_file_is_typed(storage: Storage) -> None:
    with pytest.raises(CheckpointNotFoundError, match=r"\[CHECKPOINT_NOT_FOUND\]"):
        storage.read_bytes("missing")


def test_create_exclusive(storage: Storage) -> None:
    storage.create_exclusive("chk-1/_metadata", b"first")
    with pytest.raises(CheckpointExistsError, match=r"\[CHECKPOINT_EXISTS\]"):
        storage.create_exclusive("chk-1/_metadata", b"second")
    assert storage.read_bytes("chk-1/_metadata") == b"first"
    assert [p for p in storage.walk_files() if p.endswith(".tmp")] == []  # no leftovers


def test_ranged_reads_and_counters(storage: Storage) -> None:
    storage.write_bytes("f", bytes(range(256)) * 4)
    before = storage.bytes_read
    with storage.open_input("f") as f:
        f.seek(100)
        assert f.read(4) == bytes([100, 101, 102, 103])
        assert f.tell() == 104
        f.seek(-2, 2)
        assert f.read() == bytes([254, 255])
    assert storage.bytes_read - before == 6
    assert storage.files_opened >= 1


def test_pickles_without_its_client(storage: Storage) -> None:
    storage.write_bytes("x", b"abc")
    clone = pickle.loads(pickle.dumps(storage))
    assert clone.read_bytes("x") == b"abc" and clone.url == storage.url
    assert clone.fs is not None


def test_paths_normalise_parent_references(storage: Storage) -> None:
    storage.write_bytes("_data/file", b"d")
    assert storage.child("chk-2").read_bytes("../_data/file") == b"d"


def test_credentials_are_not_echoed() -> None:
    storage = Storage("memory://creds/x", {})
    assert "secret" not in repr(Storage("s3://user:secret@bucket/x", {"anon": True}))
    assert repr(storage) == "Storage(memory://creds/x)"
