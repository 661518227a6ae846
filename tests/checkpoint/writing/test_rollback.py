"""Rolling a root back to a retained checkpoint: a new version equal to it, nothing deleted,
run on every storage (memory, local, S3), against the model of what each version wrote."""

from __future__ import annotations

from typing import Any

import pytest
from checkpoint_data import contents, fill, written

from flinkstate.checkpoint import (
    RUN_TOKEN_PROPERTY,
    CheckpointCorruptError,
    CheckpointExistsError,
    CheckpointNotFoundError,
    CheckpointStorage,
    Storage,
    VersionAppend,
    rollback,
)
from flinkstate.checkpoint.writing.rollback import ROLLED_BACK_FROM, ROLLED_BACK_TO
from flinkstate.state import HeapKeyedStateBackend, InvalidArgumentError, Types

KEYS = range(40)


def _restored(storage: CheckpointStorage, checkpoint_id: int | None = None) -> dict[Any, Any]:
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    storage.load(checkpoint_id).restore_keyed(backend, "op")
    return contents(backend)


def _commit(storage: CheckpointStorage, version: int, incremental: bool = False) -> None:
    pending = storage.begin(incremental=incremental)
    pending.write_keyed("op", fill(HeapKeyedStateBackend(key_type=Types.LONG()), KEYS, version))
    pending.commit({RUN_TOKEN_PROPERTY: f"attempt-{version}", "user.note": f"v{version}"})


def _three(location: tuple[str, dict[str, Any]]) -> CheckpointStorage:
    storage = CheckpointStorage(location[0], location[1])
    for version in (1, 2, 3):
        _commit(storage, version)
    return storage


def test_rollback_publishes_the_chosen_checkpoint_again(location: tuple[str, dict[str, Any]]) -> None:
    storage = _three(location)
    done = rollback(storage.storage, 2)
    assert (done.to, done.previous, done.version, done.committed) == (2, 3, 4, True)
    assert done.files == len(list(storage.load(2).manifest.files())) and done.bytes > 0
    assert storage.completed_ids() == [1, 2, 3, 4]  # nothing deleted
    assert _restored(storage) == written(KEYS, version=2) == _restored(storage, 2)
    assert _restored(storage, 3) == written(KEYS, version=3)
    props = storage.load().manifest.properties
    assert props[ROLLED_BACK_TO] == "2" and props[ROLLED_BACK_FROM] == "3"
    assert props["user.note"] == "v2"  # the chosen checkpoint's properties
    assert RUN_TOKEN_PROPERTY not in props  # but not the attempt that wrote it: no live backend matches


def test_a_dry_run_verifies_and_writes_nothing(location: tuple[str, dict[str, Any]]) -> None:
    storage = _three(location)
    before = sorted(storage.storage.walk_files())
    done = rollback(storage.storage, 1, dry_run=True)
    assert (done.to, done.version, done.committed) == (1, 4, False)
    assert sorted(storage.storage.walk_files()) == before
    assert _restored(storage) == written(KEYS, version=3)


def test_a_checkpoint_that_does_not_verify_is_refused(location: tuple[str, dict[str, Any]]) -> None:
    storage = _three(location)
    directory = storage.storage.child("chk-1")
    ref = next(iter(storage.load(1).manifest.files()))
    data = bytearray(directory.read_bytes(ref.path))
    data[len(data) // 2] ^= 0xFF
    directory.write_bytes(ref.path, bytes(data))
    with pytest.raises(CheckpointCorruptError, match=rf"\[CHECKPOINT_CORRUPT\] checkpoint 1 .*{ref.path}"):
        rollback(storage.storage, 1)
    assert storage.completed_ids() == [1, 2, 3]
    assert _restored(storage) == written(KEYS, version=3)


def test_unknown_and_latest_checkpoints_are_refused(location: tuple[str, dict[str, Any]]) -> None:
    storage = _three(location)
    with pytest.raises(CheckpointNotFoundError, match=r"\[CHECKPOINT_NOT_FOUND\] no completed checkpoint 7"):
        rollback(storage.storage, 7)
    with pytest.raises(
        InvalidArgumentError, match=r"\[INVALID_ARGUMENT\] checkpoint 3 is already the latest"
    ):
        rollback(storage.storage, 3)
    assert storage.completed_ids() == [1, 2, 3]


def test_an_increment_after_a_rollback_builds_on_the_rolled_back_state(tmp_path: Any) -> None:
    storage = CheckpointStorage(str(tmp_path / "root"))
    _commit(storage, 1)
    _commit(storage, 2, incremental=True)
    rollback(storage.storage, 1)
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    storage.load().restore_keyed(backend, "op")
    fill(backend, range(5), 9)  # a few keys changed after the rollback
    pending = storage.begin(incremental=True)
    pending.write_keyed("op", backend)
    pending.commit()
    expected = HeapKeyedStateBackend(key_type=Types.LONG())
    fill(fill(expected, KEYS, 1), range(5), 9)
    assert _restored(storage) == contents(expected)


def test_retention_applies_to_the_rollback_commit(tmp_path: Any) -> None:
    storage = _three((str(tmp_path / "root"), {}))
    rollback(storage.storage, 1, retain=2)
    assert storage.completed_ids() == [3, 4]
    assert _restored(storage) == written(KEYS, version=1)  # chk-1's files stay: chk-4 references them


def test_a_lost_race_publishes_nothing(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = _three((str(tmp_path / "root"), {}))
    from flinkstate.checkpoint.writing import rollback as module

    real = module.begin_append

    def racing(root: Storage, derive: bool = True) -> VersionAppend:
        append = real(root, derive)
        _commit(CheckpointStorage(storage.storage.url, retain=10), 4)  # another writer, meanwhile
        return append

    monkeypatch.setattr(module, "begin_append", racing)
    with pytest.raises(CheckpointExistsError):
        rollback(storage.storage, 1)
    assert _restored(storage) == written(KEYS, version=4)
