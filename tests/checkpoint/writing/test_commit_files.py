"""No silent corrupt commit: a commit publishes nothing unless every file its results wrote is
there with its recorded size, as the committer sees it (``[COMMIT_FILES_MISSING]``); the
attempt is aborted and the previous checkpoint restores exactly. Every publisher passes the
check: checkpoints, native uploads, appended versions. Run on every storage."""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import contents, fill
from native_job import comparable, rocks
from native_job import fill as fill_native

from flinkstate.checkpoint import (
    CheckpointStorage,
    CommitFilesMissingError,
    OperatorEntry,
    PendingStatus,
    Storage,
    SubtaskEntry,
    begin_append,
)
from flinkstate.checkpoint.writing.writer import SubtaskWriter
from flinkstate.state import HeapKeyedStateBackend, Types

KEYS = range(60)


def _backend(version: int) -> HeapKeyedStateBackend:
    return fill(HeapKeyedStateBackend(key_type=Types.LONG()), KEYS, version)


def _damage(storage: Storage, path: str, how: str) -> None:
    """Delete ``path``, or cut it short (the same name, fewer bytes)."""
    if how == "delete":
        storage.delete(path)
    else:
        storage.write_bytes(path, storage.read_bytes(path)[:-7])


@pytest.mark.parametrize("how", ["delete", "truncate"])
def test_a_written_file_missing_or_cut_publishes_nothing(
    location: tuple[str, dict[str, Any]], how: str
) -> None:
    url, options = location
    storage = CheckpointStorage(url, options)
    first = storage.begin()
    first.write_keyed("op", _backend(1))
    first.commit()
    model = contents(_backend(1))
    pending = storage.begin()
    result = pending.write_keyed("op", _backend(2)).result()
    victim = sorted(result.written)[0]
    _damage(pending.directory, victim, how)
    with pytest.raises(CommitFilesMissingError, match=r"^\[COMMIT_FILES_MISSING\] checkpoint 2 ") as err:
        pending.commit()
    assert victim in str(err.value) and pending.directory.safe_url in str(err.value)
    assert ("(missing)" if how == "delete" else "bytes,") in str(err.value)
    assert pending.status is PendingStatus.ABORTED
    assert storage.latest_id() == 1
    assert not [p for p in result.written if pending.directory.exists(p)]  # the attempt's files are gone
    restored = storage.load().keyed_backend("op", 0, 1)
    assert contents(restored) == model


def test_the_message_names_the_first_few_files(location: tuple[str, dict[str, Any]]) -> None:
    url, options = location
    pending = CheckpointStorage(url, options).begin()
    written = [p for n in range(4) for p in pending.write_keyed(f"op{n}", _backend(n)).result().written]
    assert len(written) > 8
    for path in written:
        pending.directory.delete(path)
    with pytest.raises(CommitFilesMissingError) as err:
        pending.commit()
    named = [p for p in written if p in str(err.value)]
    assert len(named) == 5 and f"and {len(written) - 5} more" in str(err.value)


def test_a_cut_native_upload_publishes_nothing(location: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    """An SST file this checkpoint uploaded to the root's shared area, cut short: found by the
    same check (a listing of the shared area), though it lives outside the checkpoint's directory."""
    url, options = location
    storage = CheckpointStorage(url, options, rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill_native(live, range(2000))
        first = storage.begin()
        first.write_subtask("op", 0, 1, 128, keyed=live)
        first.commit()
        model = comparable(live)
        fill_native(live, range(0, 2000, 50), tag="neu")
        pending = storage.begin()
        result = pending.write_subtask("op", 0, 1, 128, keyed=live).result()
    assert result.entry.native is not None
    mine = [f.ref for f in result.entry.native.files if f.sst and f.ref.checkpoint_id == 2]
    assert mine  # uploaded by this checkpoint
    path = posixpath.normpath(posixpath.join("chk-2", mine[0].path))
    _damage(storage.storage, path, "truncate")
    with pytest.raises(CommitFilesMissingError, match="COMMIT_FILES_MISSING") as err:
        pending.commit()
    assert posixpath.basename(path) in str(err.value)
    assert pending.status is PendingStatus.ABORTED and storage.latest_id() == 1
    restored = storage.load().keyed_backend("op", 0, 1, lambda **kw: rocks(tmp_path, **kw))
    try:
        assert comparable(restored) == model
    finally:
        restored.close()


def test_an_appended_version_missing_a_file_publishes_nothing(location: tuple[str, dict[str, Any]]) -> None:
    """The path of the Spark writer and the streaming sink (``VersionAppend.commit``)."""
    url, options = location
    root = Storage(url, options)
    versions = []
    for n in (1, 2):
        append = begin_append(root)
        writer = SubtaskWriter(root.child(append.directory), "op", 0, 1, 128, append.version)
        with _backend(n).snapshot() as snapshot:
            files, _, metas = writer.keyed(snapshot)
        op = OperatorEntry("op", 1, 128, Types.LONG(), metas, (), (SubtaskEntry(0, (0, 127), files),))
        if n == 2:
            root.child(append.directory).delete(writer.written[0])
            with pytest.raises(CommitFilesMissingError, match="COMMIT_FILES_MISSING"):
                append.commit(root, append.load_base(root), [op], kind="savepoint", properties={},
                              written=writer.written)  # fmt: skip
            assert not [p for p in writer.written if root.child(append.directory).exists(p)]
        else:
            versions.append(append.commit(root, None, [op], kind="savepoint", properties={}))
    assert CheckpointStorage(url, options).completed_ids() == [1]
    assert CheckpointStorage(url, options).load().manifest.to_bytes() == versions[0].to_bytes()
