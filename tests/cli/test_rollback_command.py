"""``flinkstate rollback``: a dry run, the rollback, its refusals (local disk and S3)."""

from __future__ import annotations

import json

from conftest import Job, Run

from flinkstate.checkpoint import open_checkpoint
from flinkstate.checkpoint.storage import Storage


def _digests(job: Job, checkpoint_id: int) -> list[tuple[int, str]]:
    manifest = open_checkpoint(job.root, job.options, checkpoint_id).manifest
    return sorted((f.size, f.sha256) for f in manifest.files())


def test_rollback_dry_run_then_for_real(job: Job, run: Run) -> None:
    storage = Storage(job.root, job.options)
    before = sorted(storage.walk_files())
    dry = json.loads(run("rollback", job.root, "--to", "1", "--dry-run", "--json", *job.args).stdout)
    assert dry["dry_run"] and (dry["to"], dry["previous"], dry["checkpoint_id"]) == (1, 3, 4)
    assert dry["files"] == len(_digests(job, 1)) and dry["bytes"] == sum(s for s, _ in _digests(job, 1))
    assert sorted(storage.walk_files()) == before, "a dry run writes nothing"
    text = run("rollback", job.root, "--to", "1", *job.args).stdout
    assert "published checkpoint 4 equal to checkpoint 1 (the latest was 3)" in text
    assert _digests(job, 4) == _digests(job, 1) != _digests(job, 3)
    assert [p for p in storage.walk_files() if p not in before] == ["chk-4/_metadata"]  # nothing copied
    assert run("verify", job.root, *job.args).exit_code == 0
    listed = json.loads(run("list", job.root, "--json", *job.args).stdout)["checkpoints"]
    assert sorted(c["checkpoint_id"] for c in listed) == [1, 2, 3, 4]


def test_rollback_refusals(job: Job, run: Run) -> None:
    assert "[CHECKPOINT_NOT_FOUND]" in run("rollback", job.root, "--to", "9", *job.args, code=3).stderr
    assert "[INVALID_ARGUMENT]" in run("rollback", job.root, "--to", "3", *job.args, code=3).stderr
    storage = Storage(job.root, job.options)
    ref = open_checkpoint(job.root, job.options, 2).manifest.files()[0]
    storage.delete(f"chk-2/{ref.path}")
    err = run("rollback", job.root, "--to", "2", *job.args, code=3).stderr
    assert "[CHECKPOINT_CORRUPT] checkpoint 2" in err and f"{ref.path}: missing" in err
    assert sorted(storage.list_dir()) == ["chk-1", "chk-2", "chk-3"]
