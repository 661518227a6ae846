"""One commit path, idempotent: a retried manifest create whose first attempt landed succeeds."""

from __future__ import annotations

from typing import Any

import pytest
from checkpoint_data import contents, fill, written

from flinkstate.checkpoint import CheckpointExistsError, CheckpointStorage, Storage, open_checkpoint
from flinkstate.checkpoint.storage import _is_precondition_failure
from flinkstate.state import HeapKeyedStateBackend, Types

KEYS = range(200)


def _pending(root: str, options: dict[str, Any], version: int) -> Any:
    pending = CheckpointStorage(root, options, retain=2).begin()
    pending.write_keyed("op", fill(HeapKeyedStateBackend(key_type=Types.LONG()), KEYS, version))
    return pending


def test_retry_of_a_landed_create_is_a_success(
    location: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, options = location
    _pending(root, options, version=1).commit()
    original = Storage.create_exclusive
    attempts: list[str] = []

    def landed_then_retried(self: Storage, relative: str, data: bytes) -> None:
        original(self, relative, data)  # the first attempt lands, its answer is lost ...
        attempts.append(relative)
        original(self, relative, data)  # ... and the client's retry fails its precondition

    monkeypatch.setattr(Storage, "create_exclusive", landed_then_retried)
    completed = _pending(root, options, version=2).commit()
    monkeypatch.undo()
    assert attempts == ["_metadata"]
    assert completed.checkpoint_id == 2
    storage = CheckpointStorage(root, options)
    assert storage.latest_id() == 2
    for ref in storage.load(2).manifest.files():  # nothing the manifest references was deleted
        assert storage.storage.exists(f"chk-2/{ref.path}")
    restored = open_checkpoint(root, options).keyed_backend("op", 0, 1)
    assert contents(restored) == written(KEYS, version=2)


def test_a_foreign_manifest_means_we_lost(
    location: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, options = location
    _pending(root, options, version=1).commit()
    original = Storage.create_exclusive

    def raced(self: Storage, relative: str, data: bytes) -> None:
        original(self, relative, data.replace(b'"checkpoint_id"', b'"checkpoint_id" ', 1))
        original(self, relative, data)

    monkeypatch.setattr(Storage, "create_exclusive", raced)
    pending = _pending(root, options, version=2)
    with pytest.raises(CheckpointExistsError, match="CHECKPOINT_EXISTS"):
        pending.commit()
    monkeypatch.undo()
    leftovers = [p for p in Storage(root, options).walk_files("chk-2") if not p.endswith("_metadata")]
    assert leftovers == []  # the loser deleted its own data files


class _ClientError(Exception):
    def __init__(self, response: dict[str, Any]) -> None:
        super().__init__("An error occurred")
        self.response = response


def test_precondition_failures_are_recognised_by_code_not_text() -> None:
    by_code = OSError(22, "refused")
    by_code.__cause__ = _ClientError({"Error": {"Code": "PreconditionFailed"}})
    by_status = OSError(22, "refused")
    by_status.__cause__ = _ClientError({"Error": {}, "ResponseMetadata": {"HTTPStatusCode": 412}})
    assert _is_precondition_failure(by_code)
    assert _is_precondition_failure(by_status)
    assert _is_precondition_failure(FileExistsError("x"))
    assert not _is_precondition_failure(OSError("HTTP 412 mentioned in a message"))
    other = OSError(5, "server error")
    other.__cause__ = _ClientError(
        {"Error": {"Code": "InternalError"}, "ResponseMetadata": {"HTTPStatusCode": 500}}
    )
    assert not _is_precondition_failure(other)
