"""Incremental checkpoints against full checkpoints taken at the same moment.

Property: over random operation sequences (every state kind, namespaces, TTL expiry with
incremental cleanup, full-snapshot cleanup), with some checkpoints aborted or failing,
restoring any checkpoint of a chain, at any parallelism, equals restoring the full
checkpoint taken at the same moment.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import dump
from incremental_ops import Workload

from flinkstate.checkpoint import CheckpointError, CheckpointStorage, Storage
from flinkstate.checkpoint.reading.restore import CompletedCheckpoint
from flinkstate.checkpoint.writing import pending as pending_module
from flinkstate.state import AbstractKeyedStateBackend, KeyGroupRange
from flinkstate.state.ttl.time import ManualTimeProvider

MAX_P = 32


def restored(checkpoint: CompletedCheckpoint, parallelism: int, clock: Any) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for i in range(parallelism):
        out |= dump(checkpoint.keyed_backend("op", i, parallelism, time_provider=clock))
    return out


def _owned_keys(rng: KeyGroupRange) -> list[int]:
    from flinkstate.state import assign_to_key_group

    return [k for k in range(4_000) if assign_to_key_group(k, MAX_P) in rng][:40]


class Job:
    """One subtask (1 of 2; key groups 16..31 unless ``rng``) checkpointed twice at each
    moment: incrementally and in full."""

    def __init__(
        self, make_backend: Any, tmp: Path, seed: int, rng: KeyGroupRange | None = None, **chain: Any
    ) -> None:
        self.clock = ManualTimeProvider(1_000)
        self.rng = KeyGroupRange(16, 31) if rng is None else rng
        self.backend: AbstractKeyedStateBackend = make_backend(
            max_parallelism=MAX_P, key_group_range=self.rng, time_provider=self.clock
        )
        self.work = Workload(seed, _owned_keys(self.rng), self.clock)
        self.incr = CheckpointStorage(str(tmp / "incr"), retain=3, incremental=True, **chain)
        self.full = CheckpointStorage(str(tmp / "full"), retain=3)

    def checkpoint(self, fail: str | None = None) -> tuple[CompletedCheckpoint | None, CompletedCheckpoint]:
        """Both checkpoints of this moment (the incremental one ``None`` when made to fail)."""
        pending = self.incr.begin()
        if self.work.rng.random() < 0.5:
            pending.write_keyed("op", self.backend, subtask=1, parallelism=2)
        else:  # everything of a subtask at once: the same increments
            pending.write_subtask("op", 1, 2, MAX_P, keyed=self.backend, raw_operator=[b"offsets"])
        full = self.full.begin(pending.checkpoint_id)
        full.write_keyed("op", self.backend, subtask=1, parallelism=2)
        completed_full = full.commit()
        if fail == "abort":
            pending.abort()
            return None, completed_full
        if fail == "commit":
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(pending_module, "publish_manifest", _failing_publish)
                with pytest.raises(CheckpointError, match="injected"):
                    pending.commit()
            return None, completed_full
        return pending.commit(), completed_full


def _failing_publish(*args: Any, **kwargs: Any) -> None:
    raise CheckpointError("injected commit failure", code="WRITE_FAILED")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_checkpoint_of_a_chain_restores_like_a_full_one(make_backend: Any, tmp_path: Path,
                                                              seed: int) -> None:  # fmt: skip
    """The backend's key groups are a random range per example; restored at other parallelisms."""
    fates = random.Random(seed)
    start = fates.randrange(MAX_P)
    rng = KeyGroupRange(start, fates.randrange(start, MAX_P))
    job = Job(make_backend, tmp_path, seed, rng, max_chain_files=4, max_chain_bytes_ratio=3.0)
    kinds: list[bool] = []
    for _ in range(12):
        job.work.run(job.backend, 120)
        fate = fates.choice([None, None, None, "abort", "commit"])
        incremental, full = job.checkpoint(fate)
        if incremental is None:
            continue
        kinds.append(incremental.manifest.incremental)
        expected = restored(full, 1, job.clock)
        live = {k: v for k, v in dump(job.backend).items() if k[0] != "ttl_full"}  # expired: dropped
        assert {k: v for k, v in expected.items() if k[0] != "ttl_full"} == live
        for parallelism in (1, 3, fates.randrange(2, 7)):
            assert restored(incremental, parallelism, job.clock) == expected
    assert any(kinds) and not all(kinds)  # increments, and compactions or fulls between them


def test_file_origins_and_chain_shape(make_backend: Any, tmp_path: Path) -> None:
    job = Job(make_backend, tmp_path, 7, max_chain_files=3, max_chain_bytes_ratio=100.0)
    job.work.run(job.backend, 400)
    first, _ = job.checkpoint()
    assert first is not None and not first.manifest.incremental
    chains = []
    for _ in range(4):
        job.backend.set_current_key(job.work.keys[0])
        job.backend.get_state(job.work.desc["value"]).update(42)
        done, _ = job.checkpoint()
        assert done is not None
        chains.append(done.manifest.operator("op").subtasks[0].keyed["value"])
    origins = [[(f.checkpoint_id, f.delta) for f in chain] for chain in chains]
    assert origins[0] == [(1, False), (2, True)]
    assert origins[1] == [(1, False), (2, True), (3, True)]
    assert origins[2] == [(4, False)]  # compacted: a chain of 4 files is past the bound
    assert origins[3] == [(4, False), (5, True)]
    compacted = job.incr.load(4).manifest.operator("op").subtasks[0]
    assert [f.delta for f in compacted.changes["value"]] == [True]  # kept for the change feed


def test_savepoints_are_self_contained(make_backend: Any, tmp_path: Path) -> None:
    from flinkstate.checkpoint import begin_savepoint, open_checkpoint

    job = Job(make_backend, tmp_path, 11)
    for _ in range(3):
        job.work.run(job.backend, 100)
        job.checkpoint()
    savepoint = begin_savepoint(str(tmp_path / "sp"))
    savepoint.write_keyed("op", job.backend, subtask=1, parallelism=2)
    manifest = savepoint.commit().manifest
    assert not manifest.incremental
    assert all(not f.path.startswith("..") and not f.delta for f in manifest.files())
    same_moment = CheckpointStorage(str(tmp_path / "same")).begin()
    same_moment.write_keyed("op", job.backend, subtask=1, parallelism=2)
    expected = same_moment.commit()
    job.work.run(job.backend, 100)  # the next increment still carries everything since checkpoint 3
    assert restored(open_checkpoint(str(tmp_path / "sp")), 2, job.clock) == restored(expected, 1, job.clock)
    after, full = job.checkpoint()
    assert after is not None and after.manifest.incremental
    assert restored(after, 1, job.clock) == restored(full, 1, job.clock)


def test_retention_keeps_what_chains_reference(make_backend: Any, tmp_path: Path) -> None:
    job = Job(make_backend, tmp_path, 5, max_chain_files=5, max_chain_bytes_ratio=100.0)
    job.incr = CheckpointStorage(str(tmp_path / "incr"), retain=1, incremental=True, max_chain_files=5,
                                 max_chain_bytes_ratio=100.0)  # fmt: skip
    root = job.incr.storage
    for _ in range(9):
        job.work.run(job.backend, 60)
        done, full = job.checkpoint()
        assert done is not None
        assert job.incr.completed_ids() == [done.checkpoint_id]
        on_disk = {p for p in root.walk_files() if not p.endswith("_metadata")}
        in_use = {_normal(f"chk-{done.checkpoint_id}/{f.path}") for f in done.manifest.files()}
        assert on_disk == in_use  # every file a chain needs, nothing else
        assert restored(job.incr.load(), 1, job.clock) == restored(full, 1, job.clock)


def _normal(path: str) -> str:
    import posixpath

    return posixpath.normpath(path)


@pytest.mark.parametrize("target", ["base", "delta"])
def test_a_missing_or_altered_chain_file_is_corrupt(make_backend: Any, tmp_path: Path, target: str) -> None:
    job = Job(make_backend, tmp_path, 3, max_chain_files=8, max_chain_bytes_ratio=100.0)
    for _ in range(3):
        job.work.run(job.backend, 80)
        done, _ = job.checkpoint()
    assert done is not None and done.manifest.incremental
    chain = next(c for c in done.manifest.operator("op").subtasks[0].keyed.values() if len(c) > 2)
    victim = chain[0] if target == "base" else chain[1]
    path = Path(tmp_path / "incr" / f"chk-{done.checkpoint_id}" / victim.path).resolve()
    if target == "base":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:-20] + b"x" * 20)
    with pytest.raises(CheckpointError, match=r"\[CHECKPOINT_CORRUPT\]") as info:
        job.incr.load().keyed_backend("op", 0, 1)
    message = str(info.value)
    assert Path(victim.path).name in message and f"checkpoint {done.checkpoint_id}" in message


def test_crash_at_any_write_keeps_the_previous_checkpoint_and_every_change(
    make_backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure at the n-th file write or at the manifest, for every n, of increments and
    compactions: the previous checkpoint still restores, and the next one loses nothing."""
    job = Job(make_backend, tmp_path, 13, max_chain_files=3, max_chain_bytes_ratio=100.0)
    job.work.run(job.backend, 200)
    job.checkpoint()
    real_write, real_create = Storage.write_bytes, Storage.create_exclusive
    for n in range(12):
        job.work.run(job.backend, 40)
        latest = job.incr.latest_id()
        before = restored(job.incr.load(), 1, job.clock)
        calls = {"n": 0}

        def write(
            self: Storage, relative: str, data: bytes, n: int = n, calls: dict[str, int] = calls
        ) -> None:
            calls["n"] += 1
            if calls["n"] == n + 1:
                raise OSError("injected write failure")
            real_write(self, relative, data)

        def create(self: Storage, relative: str, data: bytes) -> None:
            raise CheckpointError("injected manifest failure", code="WRITE_FAILED")

        monkeypatch.setattr(Storage, "write_bytes", write)
        if n % 4 == 3:
            monkeypatch.setattr(Storage, "create_exclusive", create)
        pending = job.incr.begin()
        pending.write_keyed("op", job.backend, subtask=1, parallelism=2)
        try:
            pending.commit()
            failed = False
        except (OSError, CheckpointError):
            failed = True
        monkeypatch.setattr(Storage, "write_bytes", real_write)
        monkeypatch.setattr(Storage, "create_exclusive", real_create)
        if failed:
            assert job.incr.latest_id() == latest
            assert restored(job.incr.load(), 1, job.clock) == before
        done, full = job.checkpoint()
        assert done is not None
        assert restored(done, 2, job.clock) == restored(full, 1, job.clock)


def test_manifests_without_origins_still_read(make_backend: Any, tmp_path: Path) -> None:
    """Manifests written before file origins and checkpoint types existed."""
    import hashlib
    import json

    from flinkstate.checkpoint import Manifest

    job = Job(make_backend, tmp_path, 2)
    for _ in range(2):
        job.work.run(job.backend, 50)
        done, full = job.checkpoint()
    assert done is not None and done.manifest.incremental
    doc = json.loads(done.manifest.to_bytes())
    doc.pop("checksum")
    doc.pop("incremental")

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("changes", None)
            if "path" in node:
                node.pop("checkpoint_id", None), node.pop("delta", None)
            for value in node.values():
                strip(value)
        elif isinstance(node, list):
            for value in node:
                strip(value)

    strip(doc["operators"])
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    old = Manifest.from_bytes(json.dumps({**doc, "checksum": digest}).encode())
    assert not old.incremental and all(f.checkpoint_id is None and not f.delta for f in old.files())
    old_checkpoint = CompletedCheckpoint(done.directory, old)
    assert restored(old_checkpoint, 2, job.clock) == restored(full, 1, job.clock)  # deltas still apply


def test_tasks_write_increments_a_driver_commits(make_backend: Any, tmp_path: Path) -> None:
    """The runner's protocol: a picklable target to the task, the result back, commit, notify."""
    import pickle

    job = Job(make_backend, tmp_path, 17, max_chain_files=8, max_chain_bytes_ratio=100.0)
    for round_ in range(4):
        job.work.run(job.backend, 80)
        pending = job.incr.begin()
        target = pickle.loads(pickle.dumps(pending.target))  # shipped to the executor
        result = pickle.loads(pickle.dumps(target.write_keyed("op", job.backend, 1, 2)))
        full = job.full.begin(pending.checkpoint_id)
        full.write_keyed("op", job.backend, subtask=1, parallelism=2)
        pending.add(result)
        done = pending.commit()
        job.backend.notify_checkpoint_complete(done.checkpoint_id)  # the task learns of the commit
        assert done.manifest.incremental == (round_ > 0)
        assert restored(done, 3, job.clock) == restored(full.commit(), 1, job.clock)


def test_a_restored_backend_checkpoints_in_full_first(make_backend: Any, tmp_path: Path) -> None:
    """Restored entries are no change of ours: the first checkpoint after a restore is full,
    the next one an increment over it."""
    job = Job(make_backend, tmp_path, 19, max_chain_files=8, max_chain_bytes_ratio=100.0)
    for _ in range(2):
        job.work.run(job.backend, 150)
        done, _ = job.checkpoint()
    assert done is not None and done.manifest.incremental
    job.backend = done.keyed_backend("op", 1, 2, backend_factory=make_backend, time_provider=job.clock)
    for round_ in range(2):
        job.work.run(job.backend, 100)
        done, full = job.checkpoint()
        assert done is not None and done.manifest.incremental == (round_ == 1)
        assert restored(done, 3, job.clock) == restored(full, 1, job.clock)
