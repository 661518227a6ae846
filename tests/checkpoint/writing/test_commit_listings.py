"""The commit's file check costs one listing per directory, never a request per file: counted
on the real filesystem of each storage (memory, local, S3), its own methods still running."""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import fill
from native_job import fill as fill_native
from native_job import rocks

from flinkstate.checkpoint import CheckpointStorage, Manifest, Storage, begin_savepoint
from flinkstate.checkpoint.writing import committer
from flinkstate.state import HeapKeyedStateBackend, Types


class Requests:
    """The calls made on a filesystem while ``recording``: the outermost ones only, not those a
    call makes itself (a local listing with sizes stats each entry it lists)."""

    METHODS = ("ls", "find", "walk", "glob", "info", "size", "exists", "isfile", "isdir", "open", "cat_file")

    def __init__(self, fs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str]] = []
        self.recording = True
        self._depth = 0
        for name in self.METHODS:
            monkeypatch.setattr(fs, name, self._counted(name, getattr(fs, name)))

    def _counted(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if self.recording and self._depth == 0:
                self.calls.append((name, str(args[0] if args else kwargs.get("path"))))
            self._depth += 1
            try:
                return real(*args, **kwargs)
            finally:
                self._depth -= 1

        return call

    def listings(self) -> Counter[str]:
        return Counter(path for name, path in self.calls if name == "ls")

    def names(self) -> set[str]:
        return {posixpath.basename(path.rstrip("/")) for _, path in self.calls}


def test_a_commit_lists_its_directory_once_not_each_file(
    location: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, options = location
    pending = begin_savepoint(url + "/sp", options)
    futures = [
        pending.write_keyed(f"op{n}", fill(HeapKeyedStateBackend(key_type=Types.LONG()), range(50), n))
        for n in range(4)
    ]
    written = {p for f in futures for p in f.result().written}
    assert len(written) >= 12
    requests = Requests(pending.directory.fs, monkeypatch)
    pending.commit()
    assert requests.listings() == Counter({pending.directory.root: 1})
    assert not requests.names() & written  # no request for any data file
    assert {c for c, _ in requests.calls} <= {"ls", "open"}  # "open": the manifest, on memory://


def test_a_native_commit_lists_each_directory_once(
    location: tuple[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint's directory and the shared area its SST files went to: each listed once
    before publishing (the check for earlier checkpoints' files leaves them to it)."""
    url, options = location
    storage = CheckpointStorage(url, options, rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill_native(live, range(2000))
        first = storage.begin()
        first.write_subtask("op", 0, 1, 128, keyed=live)
        first.commit()
        fill_native(live, range(0, 2000, 50), tag="neu")
        pending = storage.begin()
        result = pending.write_subtask("op", 0, 1, 128, keyed=live).result()
    assert result.entry.native is not None
    assert pending.directory.fs is storage.storage.fs
    requests = Requests(storage.storage.fs, monkeypatch)
    check = committer.check_written

    def checked_then_stop(directory: Storage, manifest: Manifest) -> None:
        check(directory, manifest)
        requests.recording = False  # what follows is the create and retention

    monkeypatch.setattr(committer, "check_written", checked_then_stop)
    pending.commit()
    listings = requests.listings()
    assert listings[pending.directory.root] == 1
    assert listings[storage.storage.path("_data/native")] == 1
    assert max(listings.values()) == 1
    assert not requests.names() & {posixpath.basename(f.ref.path) for f in result.entry.native.files}
