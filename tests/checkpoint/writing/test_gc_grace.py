"""Garbage collection beside running jobs: an orphan (a file no manifest references, perhaps
a job's not yet committed) goes only once older than a grace period; retired versions and
stray files of completed versions go at once."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import contents, fill, written

from flinkstate.checkpoint import DEFAULT_GRACE, CheckpointError, CheckpointStorage, Storage
from flinkstate.checkpoint import storage as storage_module
from flinkstate.checkpoint.storage import modified_time
from flinkstate.state import HeapKeyedStateBackend, Types

KEYS = range(30)
OLD = time.time() - 2 * DEFAULT_GRACE.total_seconds()


def _commit(storage: CheckpointStorage, version: int) -> None:
    pending = storage.begin()
    pending.write_keyed("op", fill(HeapKeyedStateBackend(key_type=Types.LONG()), KEYS, version))
    pending.commit()


def _age(path: Path) -> None:
    os.utime(path, (OLD, OLD))


def test_old_orphans_go_fresh_ones_stay(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for version in (1, 2, 3):
        _commit(CheckpointStorage(str(root), retain=3), version)
    storage = CheckpointStorage(str(root), retain=2)
    (root / "_data").mkdir()
    for name in ("old.parquet", "fresh.parquet"):  # a streaming batch's files, not committed
        (root / "_data" / name).write_bytes(b"x")
    _age(root / "_data" / "old.parquet")
    (root / "chk-0").mkdir()  # an attempt with no manifest, below the newest completed
    for name in ("old.parquet", "fresh.parquet"):
        (root / "chk-0" / name).write_bytes(b"x")
    _age(root / "chk-0" / "old.parquet")
    (root / "chk-3" / "stray.parquet").write_bytes(b"x")  # a failed task attempt's, fresh
    retired = sorted(f"chk-1/{p.name}" for p in (root / "chk-1").iterdir())

    dry = storage.cleanup(dry_run=True)
    garbage = storage.cleanup()
    assert garbage == dry
    assert sorted(garbage.deleted) == sorted(
        ["_data/old.parquet", "chk-0/old.parquet", "chk-3/stray.parquet", *retired]
    )
    assert sorted(garbage.young) == ["_data/fresh.parquet", "chk-0/fresh.parquet"]
    assert garbage.undated == ()
    assert sorted(p.name for p in (root / "_data").iterdir()) == ["fresh.parquet"]
    assert sorted(p.name for p in (root / "chk-0").iterdir()) == ["fresh.parquet"]
    assert not (root / "chk-1").exists()
    assert contents(storage.load().keyed_backend("op", 0, 1)) == written(KEYS, version=3)

    _age(root / "_data" / "fresh.parquet")
    _age(root / "chk-0" / "fresh.parquet")
    assert sorted(storage.cleanup().deleted) == ["_data/fresh.parquet", "chk-0/fresh.parquet"]
    assert not (root / "chk-0").exists()


def test_a_commit_keeps_fresh_orphans_of_another_writer(tmp_path: Path) -> None:
    """Commit-time retention obeys the same grace: another writer's files survive it."""
    root = tmp_path / "root"
    storage = CheckpointStorage(str(root), retain=1)
    _commit(storage, 1)
    (root / "_data").mkdir()
    (root / "_data" / "theirs.parquet").write_bytes(b"x")
    _commit(storage, 2)
    assert (root / "_data" / "theirs.parquet").exists()
    _age(root / "_data" / "theirs.parquet")
    _commit(storage, 3)
    assert not (root / "_data" / "theirs.parquet").exists()


def test_every_filesystem_gives_a_time(location: tuple[str, dict[str, Any]]) -> None:
    """memory, local and S3 each report a modification time: a fresh orphan is young (not
    undated) under the default grace, and goes with a grace of zero."""
    url, options = location
    storage = CheckpointStorage(url, options, retain=1)
    _commit(storage, 1)
    storage.storage.write_bytes("_data/orphan.parquet", b"x")
    kept = storage.cleanup()
    assert kept.young == ("_data/orphan.parquet",) and kept.deleted == () and kept.undated == ()
    gone = storage.cleanup(older_than=timedelta(0), allow_short_grace=True)
    assert gone.deleted == ("_data/orphan.parquet",)
    assert not storage.storage.exists("_data/orphan.parquet")


def test_a_file_of_unknown_age_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    storage = CheckpointStorage(str(root), retain=1)
    _commit(storage, 1)
    (root / "_data").mkdir()
    (root / "_data" / "orphan.parquet").write_bytes(b"x")
    _age(root / "_data" / "orphan.parquet")
    monkeypatch.setattr(storage_module, "modified_time", lambda info: None)
    garbage = storage.cleanup(older_than=timedelta(0), allow_short_grace=True)
    assert garbage.undated == ("_data/orphan.parquet",) and garbage.deleted == ()
    assert (root / "_data" / "orphan.parquet").exists()


def test_a_short_grace_needs_to_be_allowed(tmp_path: Path) -> None:
    storage = CheckpointStorage(str(tmp_path / "root"))
    _commit(storage, 1)
    with pytest.raises(CheckpointError, match=r"\[GRACE_TOO_SHORT\]"):
        storage.cleanup(older_than=timedelta(minutes=59))
    with pytest.raises(CheckpointError, match=r"\[INVALID_ARGUMENT\]"):
        storage.cleanup(older_than=timedelta(hours=-1), allow_short_grace=True)
    with pytest.raises(CheckpointError, match=r"\[INVALID_ARGUMENT\]"):
        storage.cleanup(older_than=3600)  # type: ignore[arg-type]
    assert storage.cleanup(older_than=timedelta(hours=1)).deleted == ()
    assert storage.cleanup(older_than=timedelta(minutes=1), allow_short_grace=True).deleted == ()


def test_modified_time_of_each_filesystem(tmp_path: Path) -> None:
    when = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
    stamp = when.timestamp()
    (tmp_path / "f").write_bytes(b"x")
    os.utime(tmp_path / "f", (stamp, stamp))
    local = Storage(str(tmp_path)).fs.info(str(tmp_path / "f"))
    memory = Storage("memory://grace-info")
    memory.write_bytes("f", b"x")
    memory_info = memory.fs.info(memory.path("f"))
    infos = {
        "local": (local, stamp),
        "s3": ({"LastModified": when, "size": 1}, stamp),
        "azure": ({"last_modified": when.replace(tzinfo=None)}, stamp),  # no zone: UTC
        "gcs": ({"updated": "2026-03-01T12:00:00.000Z"}, stamp),
        "memory find": ({"created": stamp}, stamp),
    }
    for name, (info, want) in infos.items():
        assert modified_time(info) == pytest.approx(want), name
    assert abs(modified_time(memory_info) - time.time()) < 60  # type: ignore[operator]
    for nothing in ({}, {"size": 3}, {"mtime": None}, {"updated": "yesterday"}, {"mtime": True}):
        assert modified_time(nothing) is None
