"""``verify``, ``rescale`` and ``gc``, and credentials never printed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import MAX_P, ORDER_KEY, Job, Run, model, s3_args, write_job

from flinkstate.checkpoint import open_checkpoint
from flinkstate.checkpoint.storage import Storage
from flinkstate.state import HeapKeyedStateBackend, Types, ValueStateDescriptor


def test_verify_an_intact_checkpoint(job: Job, run: Run) -> None:
    doc = json.loads(run("verify", job.root, *job.args, "--json").stdout)
    manifest = open_checkpoint(job.root, job.options).manifest
    assert doc == {
        "checkpoints": ["chk-3"],
        "files": len(manifest.files()),
        "ok": True,
        "problems": [],
        "bytes": sum(f.size for f in manifest.files()),
    }
    every = json.loads(run("verify", job.root, *job.args, "--all", "--json").stdout)
    assert every["checkpoints"] == ["chk-1", "chk-2", "chk-3"] and every["files"] == 3 * doc["files"]
    assert "OK: " in run("verify", job.root, *job.args).stdout


def test_verify_names_corrupt_and_missing_files(job: Job, run: Run) -> None:
    storage = Storage(job.root, job.options)
    manifest = open_checkpoint(job.root, job.options).manifest
    altered, truncated, missing = (f.path for f in manifest.files()[:3])
    data = bytearray(storage.read_bytes(f"chk-3/{altered}"))
    data[len(data) // 2] ^= 0xFF
    storage.delete(f"chk-3/{altered}")
    storage.write_bytes(f"chk-3/{altered}", bytes(data))
    short = storage.read_bytes(f"chk-3/{truncated}")[:-10]
    storage.delete(f"chk-3/{truncated}")
    storage.write_bytes(f"chk-3/{truncated}", short)
    storage.delete(f"chk-3/{missing}")
    result = run("verify", job.root, *job.args, "--json", code=1)
    problems = {p["path"]: p["problem"] for p in json.loads(result.stdout)["problems"]}
    assert problems == {
        altered: "its SHA-256 is not the manifest's: altered",
        truncated: f"has {len(short)} bytes; the manifest says {len(short) + 10}",
        missing: "missing",
    }
    table = run("verify", job.root, *job.args, code=1).stdout
    assert "3 problem(s)" in table and missing in table
    assert run("verify", job.root, *job.args, "-c", "2").exit_code == 0


def test_verify_a_corrupt_manifest_and_nothing_to_verify(tmp_path: Path, run: Run) -> None:
    root = tmp_path / "root"
    write_job(str(root), {}, versions=1)
    (root / "chk-1" / "_metadata").write_bytes(
        (root / "chk-1" / "_metadata").read_bytes().replace(b'"rows": 2', b'"rows": 3', 1)
    )
    doc = json.loads(run("verify", str(root), "--json", code=1).stdout)
    assert doc["problems"] == [
        {
            "checkpoint": "chk-1",
            "path": "_metadata",
            "problem": "manifest chk-1 fails its checksum: truncated or altered",
        }
    ]
    assert run("verify", str(tmp_path / "empty"), code=3).stderr.startswith("[CHECKPOINT_NOT_FOUND]")


def test_rescale_to_another_max_parallelism(job: Job, run: Run, tmp_path: Path) -> None:
    target = str(tmp_path / "sp-64") if not job.args else job.root.replace("/checkpoints", "/sp-64")
    doc = json.loads(run("rescale", job.root, target, "--max-parallelism", "64", "--json", *job.args).stdout)
    assert doc["source_checkpoint_id"] == 3
    assert {o["uid"]: o["max_parallelism"] for o in doc["operators"]} == {
        u: [MAX_P, 64] for u in ("counter", "orders", "source")
    }
    rewritten = open_checkpoint(target, job.options)
    assert rewritten.manifest.kind == "savepoint"
    want = model(3)
    backend = rewritten.keyed_backend("orders", 0, 1, key_type=ORDER_KEY)
    assert backend.max_parallelism == 64
    amounts = {}
    for key in want["amount"]:
        backend.set_current_key(key)
        amounts[key] = backend.get_state(ValueStateDescriptor("amount", Types.DOUBLE())).value()
    assert amounts == want["amount"]
    counts = json.loads(run("show", target, "counter", "count", "-f", "json", *job.args).stdout)
    assert {r["key"]: r["value"] for r in counts} == want["count"]
    assert all(0 <= r["key_group"] < 64 for r in counts)
    again = run("rescale", job.root, target, "-m", "64", *job.args, code=3)
    assert again.stderr.startswith("[CHECKPOINT_EXISTS]")
    assert isinstance(backend, HeapKeyedStateBackend)


def test_gc_dry_run_then_for_real(job: Job, run: Run) -> None:
    storage = Storage(job.root, job.options)
    before = sorted(storage.walk_files())
    dry = json.loads(run("gc", job.root, "--retain", "1", "--dry-run", "--json", *job.args).stdout)
    assert dry["dry_run"] and dry["kept"] == [3] and dry["removed_checkpoints"] == [1, 2]
    assert sorted(storage.walk_files()) == before, "a dry run deletes nothing"
    planned = sorted(f["path"] for f in dry["files"])
    assert planned == sorted(p for p in before if not p.startswith("chk-3/"))
    assert dry["bytes"] == sum(f["bytes"] for f in dry["files"]) > 0
    done = json.loads(run("gc", job.root, "--retain", "1", "--json", *job.args).stdout)
    assert sorted(f["path"] for f in done["files"]) == planned
    assert sorted(storage.walk_files()) == sorted(p for p in before if p.startswith("chk-3/"))
    assert (
        json.loads(run("list", job.root, "--json", *job.args).stdout)["checkpoints"][0]["checkpoint_id"] == 3
    )
    assert run("verify", job.root, *job.args).exit_code == 0
    assert "deleted 0 files" in run("gc", job.root, "--retain", "1", *job.args).stdout


SECRET = "S3CR3T-do-not-print-Zq9"


@pytest.mark.s3
def test_credentials_are_never_printed(s3_options: dict[str, Any], run: Run, tmp_path: Path) -> None:
    root = f"s3://{s3_options['bucket']}/checkpoints"
    write_job(root, s3_options["options"], versions=1)
    options = {**s3_options["options"], "secret": SECRET}  # moto accepts any secret
    args = s3_args(options)
    bad_endpoint = [a.replace(options["client_kwargs"]["endpoint_url"], "http://127.0.0.1:9") for a in args]
    calls = [
        ["list", root],
        ["inspect", root, "--json"],
        ["show", root, "counter", "count", "--stats"],
        ["skew", root, "counter"],
        ["verify", root],
        ["gc", root, "--retain", "1", "--dry-run"],
        ["show", root, "nobody", "count"],
        ["list", root.replace("checkpoints", "missing")],
        ["rescale", root, f"s3://{s3_options['bucket']}/sp", "-m", "8"],
        ["list", "s3://no-such-bucket-xyz/x"],
        ["--debug", "show", root, "counter", "nope"],
        ["list", root, "-o", "client_kwargs=5"],
    ]
    outputs = []
    for argv in calls:
        result = run(*argv, *args, code=run_code(argv))
        outputs.append(result.stdout + result.stderr)
    result = run("--debug", "list", root, *bad_endpoint, code=3)
    outputs.append(result.stdout + result.stderr)
    assert "Traceback" in outputs[-1] and "Traceback" in outputs[-3], "--debug prints the traceback, redacted"
    for text in outputs:
        assert SECRET not in text


def run_code(argv: list[str]) -> int:
    """The exit status each call of the credentials test expects."""
    failing = ("nobody", "missing", "no-such-bucket-xyz", "nope", "client_kwargs=5")
    return 3 if any(f in " ".join(argv) for f in failing) else 0


def test_progress_bars_on_a_terminal(local_job: Job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from flinkstate.cli import app

    runner = CliRunner(env={"TTY_COMPATIBLE": "1", "NO_COLOR": "1", "COLUMNS": "120"})
    manifest = open_checkpoint(local_job.root).manifest
    verified = runner.invoke(app, ["verify", local_job.root])
    assert verified.exit_code == 0 and "verifying" in verified.stderr
    total = sum(f.size for f in manifest.files())
    assert f"{total / 1000:.1f}/{total / 1000:.1f} kB" in verified.stderr
    rescaled = runner.invoke(app, ["rescale", local_job.root, str(tmp_path / "sp"), "-m", "8"])
    rows = sum(
        r.rows for op in manifest.operators for st in op.subtasks for refs in st.keyed.values() for r in refs
    )
    assert rescaled.exit_code == 0 and "rewriting" in rescaled.stderr
    assert f"{rows}/{rows} rows" in rescaled.stderr


def test_credentials_in_urls_are_never_printed(run: Run) -> None:
    root = f"memory://reader:PW-in-url-77@host-{uuid.uuid4().hex[:8]}/checkpoints"
    write_job(root, {}, versions=2)
    outputs = [
        run("list", root),
        run("list", root, "--json"),
        run("inspect", root),
        run("inspect", root, "--json"),
        run("gc", root, "--retain", "1", "--json"),
        run("rescale", root, root.replace("checkpoints", "sp"), "-m", "8"),
        run("list", root.replace("checkpoints", "none"), code=3),
    ]
    for result in outputs:
        assert "PW-in-url-77" not in result.stdout + result.stderr
    assert "memory://***@host-" in outputs[0].stdout


def test_gc_older_than(local_job: Job, run: Run) -> None:
    """Orphans (no manifest references them) go only when older than --older-than; a grace
    below an hour needs --force-short-grace; durations are a number and a unit."""
    import os
    import time

    from flinkstate.cli.maintain import format_duration, parse_duration

    for text, seconds in {
        "90m": 5400,
        "2h": 7200,
        "3d": 259200,
        "45s": 45,
        "1.5h": 5400,
        " 2 h ": 7200,
    }.items():
        assert parse_duration(text).total_seconds() == seconds
        assert parse_duration(format_duration(parse_duration(text))) == parse_duration(text)
    data = Path(local_job.root) / "_data"
    data.mkdir()
    (data / "old.parquet").write_bytes(b"x")
    (data / "fresh.parquet").write_bytes(b"x")
    two_hours_ago = time.time() - 7200
    os.utime(data / "old.parquet", (two_hours_ago, two_hours_ago))
    for bad in ("soon", "5", "-1h", "2w", ""):
        assert run("gc", local_job.root, "-r", "3", "--older-than", bad, code=3).stderr.startswith(
            "[INVALID_OPTION] --older-than"
        )
    short = run("gc", local_job.root, "-r", "3", "--older-than", "30m", code=3)
    assert short.stderr.startswith("[GRACE_TOO_SHORT]")
    default = json.loads(run("gc", local_job.root, "-r", "3", "--json").stdout)
    assert default["older_than_seconds"] == 86400 and default["files"] == []
    assert sorted(default["young"]) == ["_data/fresh.parquet", "_data/old.parquet"]
    text = run("gc", local_job.root, "-r", "3", "--older-than", "90m").stdout
    assert "deleted 1 files" in text and "kept 1 unreferenced files modified within 90m" in text
    assert sorted(p.name for p in data.iterdir()) == ["fresh.parquet"]
    forced = json.loads(
        run("gc", local_job.root, "-r", "3", "--older-than", "0s", "--force-short-grace", "--json").stdout
    )
    assert [f["path"] for f in forced["files"]] == ["_data/fresh.parquet"] and forced["young"] == []
