"""``list`` and ``inspect`` against the manifests and the job's model; help, entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import MAX_P, Job, P, Run, model, write_job

from flinkstate.checkpoint import open_checkpoint
from flinkstate.checkpoint.storage import Storage
from flinkstate.checkpoint.writing.committer import publish_manifest
from flinkstate.checkpoint.writing.versions import load_version, rebase

COMMANDS = ["list", "inspect", "show", "skew", "verify", "rescale", "gc"]


def test_list_newest_first_with_sizes(job: Job, run: Run) -> None:
    doc = json.loads(run("list", job.root, *job.args, "--json").stdout)
    assert [c["checkpoint_id"] for c in doc["checkpoints"]] == [3, 2, 1]
    for entry in doc["checkpoints"]:
        manifest = open_checkpoint(job.root, job.options, entry["checkpoint_id"]).manifest
        assert entry["bytes"] == sum(f.size for f in manifest.files()) == entry["own_bytes"]
        assert entry["files"] == len(manifest.files())
        assert entry["operators"] == ["counter", "orders", "source"]
        assert (entry["kind"], entry["type"]) == ("checkpoint", "full")
        assert entry["created_at_ms"] == manifest.created_at_ms > 0
    table = run("list", job.root, *job.args).stdout
    assert "counter, orders, source" in table and "\tfull\t" in table
    assert table.index("\n3\t") < table.index("\n1\t")


def test_list_a_savepoint_and_an_unfinished_attempt(tmp_path: Path, run: Run) -> None:
    root = str(tmp_path / "root")
    write_job(root, {}, versions=2)
    Storage(root).write_bytes("chk-3/partial.parquet", b"x")  # an attempt without a manifest
    doc = json.loads(run("list", root, "--json").stdout)
    assert doc["without_manifest"] == [3]
    assert "chk-3: no manifest" in run("list", root).stdout
    single = json.loads(run("list", f"{root}/chk-2", "--json").stdout)
    assert [c["checkpoint_id"] for c in single["checkpoints"]] == [2]


def test_list_shows_a_corrupt_manifest_and_goes_on(tmp_path: Path, run: Run) -> None:
    root = tmp_path / "root"
    write_job(str(root), {}, versions=2)
    manifest = root / "chk-1" / "_metadata"
    manifest.write_bytes(manifest.read_bytes()[:-20])
    doc = json.loads(run("list", str(root), "--json").stdout)
    assert doc["checkpoints"][0]["checkpoint_id"] == 2
    assert doc["checkpoints"][1]["error"].startswith("[CHECKPOINT_CORRUPT]")
    assert "CORRUPT" in run("list", str(root)).stdout


def test_inspect_json_matches_the_manifest_and_model(job: Job, run: Run) -> None:
    doc = json.loads(run("inspect", job.root, *job.args, "--json", "--checkpoint-id", "2").stdout)
    manifest = open_checkpoint(job.root, job.options, 2).manifest
    assert doc["checkpoint_id"] == 2 and doc["kind"] == "checkpoint"
    ops = {op["uid"]: op for op in doc["operators"]}
    assert set(ops) == {"counter", "orders", "source"}
    for uid, op in ops.items():
        entry = manifest.operator(uid)
        assert entry is not None
        assert (op["parallelism"], op["max_parallelism"]) == (P, MAX_P)
        assert [st["index"] for st in op["subtasks"]] == [0, 1]
        assert sum(st["bytes"] for st in op["subtasks"]) == sum(
            f.size for s in entry.subtasks for f in s.files()
        )
    states = {s["state"]: s for op in doc["operators"] for s in op["states"]}
    want = model(2)
    assert states["count"]["entries"] == len(want["count"]) and states["count"]["kind"] == "value"
    assert states["events"]["kind"] == "list" and states["events"]["entries"] == len(want["events"])
    assert states["totals"]["entries"] == sum(len(v) for v in want["totals"].values())
    assert states["totals"]["user_key_type"] == "STRING" and states["totals"]["value_type"] == "LONG"
    assert states["seen"]["ttl"].startswith("86400000 ms") and states["seen"]["entries"] == len(want["seen"])
    assert states["amount"]["key_type"] == "ROW<region STRING, id INT>"
    assert states["amount"]["entries"] == len(want["amount"])
    for state in states.values():  # a full checkpoint: every stored row is an entry
        assert state["entries"] == state["stored_rows"]
    assert (states["offsets"]["kind"], states["sources"]["kind"], states["rules"]["kind"]) == (
        "split list",
        "union list",
        "broadcast",
    )
    text = run("inspect", job.root, *job.args).stdout
    assert "ROW<region STRING, id INT>" in text and "1d" in text and "union list" in text


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command: str, run: Run) -> None:
    text = run(command, "--help").stdout
    assert "Example: flinkstate " + command in " ".join(text.split())


def test_root_help_and_version(run: Run) -> None:
    text = run("--help").stdout
    for command in COMMANDS:
        assert command in text
    assert run("--version").stdout.startswith("flinkstate ")


def test_python_dash_m_and_the_console_script(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    write_job(root, {}, versions=1)
    env = {**os.environ, "COLUMNS": "200"}
    for argv in ([sys.executable, "-m", "flinkstate"], [str(Path(sys.executable).parent / "flinkstate")]):
        done = subprocess.run(
            [*argv, "list", root, "--json"], capture_output=True, text=True, env=env, check=False
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["checkpoints"][0]["checkpoint_id"] == 1
    done = subprocess.run(
        [sys.executable, "-m", "flinkstate", "list", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 3
    assert done.stderr.strip().startswith("[CHECKPOINT_NOT_FOUND]") and "Traceback" not in done.stderr
    import flinkstate

    assert not hasattr(flinkstate, "__file__") or flinkstate.__file__ is None, (
        "flinkstate must stay a namespace"
    )


def test_a_version_that_references_earlier_files_is_incremental(tmp_path: Path, run: Run) -> None:
    root = str(tmp_path / "root")
    write_job(root, {}, versions=1)
    storage = Storage(root)
    first = load_version(storage, 1)
    second = replace(rebase(first, "chk-1", "chk-2"), checkpoint_id=2)  # as a Spark append writes it
    publish_manifest(storage.child("chk-2"), second, [], root=storage, retain=None)
    doc = json.loads(run("list", root, "--json").stdout)
    newest, oldest = doc["checkpoints"]
    assert (newest["type"], oldest["type"]) == ("incremental", "full")
    assert newest["own_bytes"] == 0 and newest["bytes"] == oldest["bytes"] == oldest["own_bytes"]
    assert json.loads(run("inspect", root, "--json").stdout)["type"] == "incremental"
    run("gc", root, "--retain", "1")
    assert run("verify", root, "--json").exit_code == 0, "files the kept version references stay"
    assert json.loads(run("show", root, "counter", "count", "-f", "json").stdout) != []


def test_no_spark_and_no_connector(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    write_job(root, {}, versions=1)
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from flinkstate.cli import app\n"
        f"root = {root!r}\n"
        "for args in (['inspect', root], ['show', root, 'counter', 'events'], ['skew', root, 'counter']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0\n"
        "heavy = ('pyspark', 'flinkstate.connector', 'matplotlib')\n"
        "loaded = [m for m in sys.modules if m.startswith(heavy)]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
