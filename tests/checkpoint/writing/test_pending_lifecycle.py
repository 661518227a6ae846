"""A pending checkpoint's life: open, then committed, aborted or failed; every method checks it.

And the one snapshot -> write -> release path (``CheckpointTarget.write_snapshot``): every
writer of keyed state goes through it, and the snapshot is released however it ends.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import contents, fill, written

from flinkstate.checkpoint import (
    CheckpointError,
    CheckpointStateError,
    CheckpointStorage,
    CheckpointTarget,
    PendingCheckpoint,
    PendingStatus,
    SubtaskResult,
)
from flinkstate.checkpoint.writing import pending as pending_module
from flinkstate.state import HeapKeyedStateBackend, Types
from flinkstate.state.keyed.snapshot import KeyedStateSnapshot
from flinkstate.state.operator import OperatorStateBackend

KEYS = range(40)


def _backend(version: int = 1) -> HeapKeyedStateBackend:
    return fill(HeapKeyedStateBackend(key_type=Types.LONG()), KEYS, version)


def _failing_publish(*args: Any, **kwargs: Any) -> None:
    raise CheckpointError("the store did not answer", code="WRITE_FAILED")


def _in(
    status: PendingStatus, root: str, monkeypatch: pytest.MonkeyPatch, options: Any = None
) -> PendingCheckpoint:
    """A pending checkpoint (with one write) of the root ``root`` brought into ``status``."""
    pending = CheckpointStorage(root, options).begin()
    pending.write_keyed("op", _backend())
    if status is PendingStatus.COMMITTED:
        pending.commit()
    elif status is PendingStatus.ABORTED:
        pending.abort()
    elif status is PendingStatus.FAILED:
        with monkeypatch.context() as patch:
            patch.setattr(pending_module, "publish_manifest", _failing_publish)
            with pytest.raises(CheckpointError, match="WRITE_FAILED"):
                pending.commit()
    assert pending.status is status
    return pending


Call = Callable[[PendingCheckpoint], object]
CALLS: dict[str, Call] = {
    "snapshot": lambda p: p.snapshot(_backend(), "op"),
    "write_keyed": lambda p: p.write_keyed("op2", _backend()),
    "write_snapshot": lambda p: p.write_snapshot("op2", _backend().snapshot()),
    "write_operator": lambda p: p.write_operator("op3", OperatorStateBackend()),
    "write_subtask": lambda p: p.write_subtask("op4", 0, 1, 128, keyed=_backend()),
    "writer": lambda p: p.writer("op5", 0, 1, 128),
    "add": lambda p: p.add(p.target.write_keyed("added", _backend())),  # a task's result
    "commit": lambda p: p.commit(),
    "abort": lambda p: p.abort(),
}
CLOSED = [PendingStatus.COMMITTED, PendingStatus.ABORTED, PendingStatus.FAILED]


@pytest.mark.parametrize("status", CLOSED, ids=lambda s: s.value)
@pytest.mark.parametrize("method", sorted(CALLS))
def test_every_method_checks_the_state(
    method: str, status: PendingStatus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pending = _in(status, str(tmp_path / "root"), monkeypatch)
    if method == "abort" and status is PendingStatus.ABORTED:
        pending.abort()  # aborting again does nothing
    else:
        with pytest.raises(CheckpointStateError, match=rf"\[CHECKPOINT_STATE\].*{status.value}") as info:
            CALLS[method](pending)
        assert isinstance(info.value, RuntimeError) and info.value.code == "CHECKPOINT_STATE"
    assert pending.status is status


@pytest.mark.parametrize("method", sorted(CALLS))
def test_every_method_works_while_open(method: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pending = _in(PendingStatus.OPEN, str(tmp_path / "root"), monkeypatch)
    done = CALLS[method](pending)
    if isinstance(done, KeyedStateSnapshot):
        done.release()
    want = {"commit": PendingStatus.COMMITTED, "abort": PendingStatus.ABORTED}.get(method, PendingStatus.OPEN)
    assert pending.status is want
    if want is PendingStatus.OPEN:
        pending.commit()
        assert pending.status is PendingStatus.COMMITTED


def test_a_failed_write_aborts_the_commit(location: tuple[str, dict[str, Any]]) -> None:
    """An error before publishing: the attempt is aborted (its files gone) and re-raised."""
    storage = CheckpointStorage(*location)
    first = storage.begin()
    first.write_keyed("op", _backend(1))
    first.commit()
    pending = storage.begin()
    pending.write_keyed("op", _backend(2))
    pending.write_keyed("op", _backend(2))  # the same state twice: the manifest cannot be built
    with pytest.raises(CheckpointError, match="twice"):
        pending.commit()
    assert pending.status is PendingStatus.ABORTED
    assert storage.storage.list_dir("chk-2") == []
    assert contents(storage.load().keyed_backend("op", 0, 1)) == written(KEYS, version=1)


def test_a_failed_publish_keeps_the_files(
    location: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publishing raised: the manifest may still land, so nothing is deleted and it is FAILED."""
    root, options = location
    _in(PendingStatus.FAILED, root, monkeypatch, options)
    files = CheckpointStorage(root, options).storage.list_dir("chk-1")
    assert files and all(name.endswith(".parquet") for name in files)  # no manifest, data kept


def test_a_lost_race_is_aborted(location: tuple[str, dict[str, Any]]) -> None:
    """Another committer's manifest is there: ours is ABORTED (its files were deleted)."""
    ours, theirs = CheckpointStorage(*location).begin(1), CheckpointStorage(*location).begin(1)
    ours.write_keyed("op", _backend(1))
    theirs.write_keyed("op", _backend(2))
    theirs.commit()
    with pytest.raises(CheckpointError, match="CHECKPOINT_EXISTS"):
        ours.commit()
    assert ours.status is PendingStatus.ABORTED
    assert contents(CheckpointStorage(*location).load().keyed_backend("op", 0, 1)) == written(KEYS, version=2)


class _Releases:
    """Counts the snapshots released (every keyed snapshot taken must be, once)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = KeyedStateSnapshot.release

        def release(snapshot: KeyedStateSnapshot) -> None:
            self.count += 1
            original(snapshot)

        monkeypatch.setattr(KeyedStateSnapshot, "release", release)


def test_the_one_path_releases_the_snapshot_however_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    releases = _Releases(monkeypatch)
    target = CheckpointTarget(CheckpointStorage(str(tmp_path / "root")).storage.child("chk-1"), 1)
    result = target.write_keyed("op", _backend(), operator=OperatorStateBackend())
    assert releases.count == 1 and result.entry.keyed

    def broken_base(uid: str, snapshot: KeyedStateSnapshot | None) -> None:
        raise OSError("base unreadable")

    with pytest.raises(OSError, match="base unreadable"):
        target.write_snapshot("op", 0, 1, _backend().snapshot(), base_of=broken_base)
    assert releases.count == 2
    target.discard(result)
    assert list((tmp_path / "root" / "chk-1").iterdir()) == []


def test_pending_writes_go_through_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """write_keyed, write_snapshot, write_subtask and write_operator: the target's one path;
    a snapshot handed to a checkpoint that takes no more writes is released at once."""
    releases = _Releases(monkeypatch)
    calls: list[str] = []
    original = CheckpointTarget.write_snapshot

    def spy(self: CheckpointTarget, uid: str, *args: Any, **kwargs: Any) -> SubtaskResult:
        calls.append(uid)
        return original(self, uid, *args, **kwargs)

    monkeypatch.setattr(CheckpointTarget, "write_snapshot", spy)
    pending = CheckpointStorage(str(tmp_path / "root")).begin()
    pending.write_keyed("a", _backend())
    pending.write_snapshot("b", pending.snapshot(_backend(), "b"))
    pending.write_subtask("c", 0, 1, 128, keyed=_backend(), operator=OperatorStateBackend())
    pending.write_operator("d", OperatorStateBackend())
    late = pending.snapshot(_backend(), "e")
    pending.commit()
    assert sorted(calls) == ["a", "b", "c", "d"] and releases.count == 3
    with pytest.raises(CheckpointStateError):
        pending.write_snapshot("e", late)
    assert releases.count == 4


def test_an_operator_state_file_not_kept_is_a_typed_error(tmp_path: Path) -> None:
    """Operator and raw state files are listed even without rows; a write that left none
    behind is ``[WRITE_FAILED]``, never a manifest without the file."""
    import pyarrow as pa

    from flinkstate.checkpoint.parquet_files import write_row_groups
    from flinkstate.checkpoint.storage import Storage
    from flinkstate.checkpoint.writing.writer import SubtaskWriter

    writer = SubtaskWriter(Storage(str(tmp_path)), "op", 0, 1, 128, checkpoint_id=1)
    schema = pa.schema([("v", pa.int64())])
    kept = writer._kept("o-list", lambda sink: write_row_groups(schema, [], sink=sink))
    assert kept.rows == 0 and (tmp_path / kept.path).exists()
    with pytest.raises(CheckpointError, match=r"\[WRITE_FAILED\].*o-empty"):
        writer._kept("o-empty", lambda sink: write_row_groups(schema, [], sink=sink, keep_empty=False))
