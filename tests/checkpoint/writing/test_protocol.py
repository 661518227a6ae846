"""The commit protocol: ids, discovery, retention, exclusive commits, crashes, corruption."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import contents, fill, written

from flinkstate.checkpoint import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointExistsError,
    CheckpointStorage,
    Storage,
    begin_savepoint,
    open_checkpoint,
)
from flinkstate.state import HeapKeyedStateBackend, Types

KEYS = range(300)


def _backend(version: int = 0) -> HeapKeyedStateBackend:
    return fill(HeapKeyedStateBackend(key_type=Types.LONG()), KEYS, version)


def _commit(root: str, options: dict[str, Any], version: int, checkpoint_id: int | None = None) -> int:
    pending = CheckpointStorage(root, options, retain=2).begin(checkpoint_id)
    pending.write_keyed("op", _backend(version))
    return pending.commit().checkpoint_id


def _restored(root: str, options: dict[str, Any], checkpoint_id: int | None = None) -> Any:
    return contents(open_checkpoint(root, options, checkpoint_id).keyed_backend("op", 0, 1))


def test_ids_discovery_and_retention(location: tuple[str, dict[str, Any]]) -> None:
    root, options = location
    storage = CheckpointStorage(root, options, retain=2)
    assert storage.latest_id() is None
    assert [_commit(root, options, v) for v in range(4)] == [1, 2, 3, 4]
    assert storage.completed_ids() == [3, 4]  # retention: the last two
    assert _restored(root, options) == written(KEYS, version=3)
    assert _restored(root, options, 3) == written(KEYS, version=2)
    referenced = {f"chk-{i}/{f.path}" for i in (3, 4) for f in storage.load(i).manifest.files()}
    on_disk = {p for p in storage.storage.walk_files() if not p.endswith("_metadata")}
    assert on_disk == referenced
    with pytest.raises(CheckpointError, match="CHECKPOINT_ID_NOT_NEW"):
        storage.begin(4)


def test_second_committer_of_an_id_loses(location: tuple[str, dict[str, Any]]) -> None:
    root, options = location
    storage = CheckpointStorage(root, options)
    first, second = storage.begin(7), storage.begin(7)
    first.write_keyed("op", _backend(1))
    second.write_keyed("op", _backend(2))
    first.commit()
    with pytest.raises(CheckpointExistsError, match=r"\[CHECKPOINT_EXISTS\]"):
        second.commit()
    assert _restored(root, options) == written(KEYS, version=1)
    manifest = storage.load(7).manifest
    files = {f"chk-7/{f.path}" for f in manifest.files()} | {"chk-7/_metadata"}
    assert set(storage.storage.walk_files()) == files  # the loser's files are gone


def _commit_in_process(root: str, options: dict[str, Any], version: int, barrier: Any, result: Any) -> None:
    try:
        pending = CheckpointStorage(root, options, retain=2).begin(1)
        barrier.wait(timeout=120)  # both have begun: the race is in writing and committing
        pending.write_keyed("op", _backend(version))
        pending.commit()
        result.put(("won", version))
    except CheckpointExistsError:
        result.put(("lost", version))
    except BaseException as exc:  # anything else fails the test at once, with its message
        result.put((f"error: {exc!r}", version))


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_concurrent_commit_from_two_processes(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "local":
        root, options = str(tmp_path / "root"), {}
    else:
        s3 = request.getfixturevalue("s3_options")
        root, options = f"s3://{s3['bucket']}/root", s3["options"]
    ctx = multiprocessing.get_context("spawn")
    barrier, result = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_commit_in_process, args=(root, options, v, barrier, result)) for v in (1, 2)]
    for p in procs:
        p.start()
    outcomes = sorted(result.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert [o for o, _ in outcomes] == ["lost", "won"]
    winner = next(v for o, v in outcomes if o == "won")
    assert _restored(root, options) == written(KEYS, version=winner)


PHASES = ["after_first_file", "after_all_files", "before_manifest", "after_manifest"]


def _crashing_writer(root: str, phase: str, ready: Any) -> None:
    """Write checkpoint 2 and stop dead (the parent SIGKILLs us) at ``phase``."""
    original_write = Storage.write_bytes
    original_create = Storage.create_exclusive
    state = {"files": 0}

    def halt() -> None:
        ready.set()
        time.sleep(600)

    def write_bytes(self: Storage, relative: str, data: bytes) -> None:
        original_write(self, relative, data)
        state["files"] += 1
        if phase == "after_first_file":
            halt()

    def create_exclusive(self: Storage, relative: str, data: bytes) -> None:
        if phase == "after_all_files":
            halt()
        if phase == "before_manifest":  # the manifest's temporary file written, not yet linked
            with open(self.path(relative) + ".crash.tmp", "wb") as f:
                f.write(data[: len(data) // 2])
            halt()
        original_create(self, relative, data)
        halt()

    Storage.write_bytes = write_bytes  # type: ignore[method-assign]
    Storage.create_exclusive = create_exclusive  # type: ignore[method-assign]
    _commit(root, {}, version=9)


@pytest.mark.parametrize("phase", PHASES)
def test_crash_at_every_phase(phase: str, tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    _commit(root, {}, version=1)
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_crashing_writer, args=(root, phase, ready))
    proc.start()
    assert ready.wait(120), "the writer never reached its crash point"
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    storage = CheckpointStorage(root)
    if phase == "after_manifest":
        assert storage.latest_id() == 2 and _restored(root, {}) == written(KEYS, version=9)
        return
    assert storage.latest_id() == 1 and _restored(root, {}) == written(KEYS, version=1)
    attempt = tmp_path / "root" / "chk-2"
    left = sorted(p.name for p in attempt.iterdir())
    assert left  # the unfinished attempt left files ...
    _commit(root, {}, version=3)  # ... which a commit's cleanup keeps while they may be a writer's
    assert sorted(p.name for p in attempt.iterdir()) == left
    old = time.time() - 2 * 86400
    for path in attempt.iterdir():
        os.utime(path, (old, old))
    _commit(root, {}, version=4)  # ... and removes once older than the grace period
    assert not attempt.exists()
    assert _restored(root, {}) == written(KEYS, version=4)


def test_corrupt_manifests_and_files(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    _commit(root, {}, version=1)
    chk = tmp_path / "root" / "chk-1"
    manifest = (chk / "_metadata").read_bytes()
    (chk / "_metadata").write_bytes(manifest[:-40])
    with pytest.raises(CheckpointCorruptError, match=r"\[CHECKPOINT_CORRUPT\].*_metadata"):
        open_checkpoint(root)
    doc = json.loads(manifest)
    doc["checkpoint_id"] = 99
    (chk / "_metadata").write_text(json.dumps(doc))
    with pytest.raises(CheckpointCorruptError, match="checksum"):
        open_checkpoint(root)
    (chk / "_metadata").write_bytes(manifest)
    data = sorted(p for p in chk.iterdir() if p.suffix == ".parquet")[0]
    content = data.read_bytes()
    data.write_bytes(content[:-100])
    with pytest.raises(CheckpointCorruptError, match=data.name):
        open_checkpoint(root).keyed_backend("op", 0, 1)
    flipped = bytearray(content)
    flipped[len(flipped) // 3] ^= 0xFF
    data.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointCorruptError, match=data.name):
        open_checkpoint(root).keyed_backend("op", 0, 1)
    data.unlink()
    with pytest.raises(CheckpointCorruptError, match=data.name):
        open_checkpoint(root).keyed_backend("op", 0, 1)


def test_unknown_manifest_version(tmp_path: Path) -> None:
    import hashlib

    root = str(tmp_path / "root")
    _commit(root, {}, version=1)
    path = tmp_path / "root" / "chk-1" / "_metadata"
    doc = json.loads(path.read_bytes())
    doc.pop("checksum")
    doc["version"] = 999
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    path.write_text(json.dumps({**doc, "checksum": hashlib.sha256(canonical).hexdigest()}))
    with pytest.raises(CheckpointError, match="UNSUPPORTED_VERSION"):
        open_checkpoint(root)


def test_odd_names_round_trip_safely(tmp_path: Path) -> None:
    from flinkstate.state import ValueStateDescriptor

    names = ["a/b", "../escape", "nul\x00name", "ünïcödé 🙂", ".."]
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    backend.set_current_key(1)
    for i, name in enumerate(names):
        backend.get_state(ValueStateDescriptor(name, Types.LONG())).update(i)
    pending = CheckpointStorage(str(tmp_path / "root")).begin()
    pending.write_keyed("../op/\x00", backend)
    pending.commit()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert all(p.is_relative_to(tmp_path / "root" / "chk-1") for p in files)
    restored = open_checkpoint(str(tmp_path / "root")).keyed_backend("../op/\x00", 0, 1)
    restored.set_current_key(1)
    assert [restored.get_state(ValueStateDescriptor(n, Types.LONG())).value() for n in names] == [
        0,
        1,
        2,
        3,
        4,
    ]


def test_savepoints_are_relocatable(location: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    root, options = location
    pending = begin_savepoint(root + "/sp-1", options)
    pending.write_keyed("op", _backend(5))
    pending.commit()
    with pytest.raises(CheckpointError, match="already holds a savepoint"):
        begin_savepoint(root + "/sp-1", options)
    source = Storage(root + "/sp-1", options)
    target = Storage(root + "/moved/elsewhere", options)
    for path in source.walk_files():
        target.write_bytes(path, source.read_bytes(path))
    source.delete("")
    assert contents(open_checkpoint(root + "/moved/elsewhere", options).keyed_backend("op", 0, 1)) == written(
        KEYS, version=5
    )


def test_files_are_plain_parquet(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    root = str(tmp_path / "root")
    _commit(root, {}, version=0)
    manifest = open_checkpoint(root).manifest
    value_file = next(f for st in manifest.operators[0].subtasks for f in st.keyed["value"])
    table = pq.read_table(tmp_path / "root" / "chk-1" / value_file.path)
    assert table.column_names == ["key_group", "key", "namespace", "value"]
    assert table.num_rows == value_file.rows
    assert set(table.column("key_group").to_pylist()) == set(value_file.key_groups)
