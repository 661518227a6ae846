"""Progress of long work: hooks in the checkpoint layer, bars on a terminal only.

``gc`` looks at every file under ``_data`` and the checkpoint directories it may clean; its
hook counts them up to the number it listed. Off a terminal the commands print exactly
what they printed before bars existed (nothing on stderr); on a terminal (``TTY_COMPATIBLE=1``)
each long step draws a bar.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from pathlib import Path

from conftest import Job, write_job
from typer.testing import CliRunner

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.cli import app
from flinkstate.cli.render import human_bytes


def _files_gc_looks_at(root: str, newest: int) -> int:
    """Files under ``_data`` and ``chk-<i>`` (``i`` up to the newest completed), counted on disk."""
    count = 0
    for name in os.listdir(root):
        version = int(name[4:]) if name.startswith("chk-") else None
        if name == "_data" or (version is not None and version <= newest):
            count += sum(len(files) for _, _, files in os.walk(os.path.join(root, name)))
    return count


def _monotonic_to(calls: list[tuple[int, int]], total: int) -> None:
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    assert [d for d, _ in calls] == list(range(total + 1)) and {t for _, t in calls} == {total}


def _record(storage: CheckpointStorage, dry_run: bool) -> list[tuple[int, int]]:
    """The calls a cleanup of ``storage`` makes of its progress hook."""
    calls: list[tuple[int, int]] = []
    storage.cleanup(dry_run, progress=lambda done, total: calls.append((done, total)))
    return calls


def test_gc_hook_counts_every_file_up_to_the_total(tmp_path: Path) -> None:
    root = str(tmp_path / "c")
    write_job(root, {}, versions=4)
    storage = CheckpointStorage(root, retain=2)
    total = _files_gc_looks_at(root, 4)
    assert total > 20
    for dry_run in (True, False):
        _monotonic_to(_record(storage, dry_run), total)
    after = _files_gc_looks_at(root, 4)
    assert 0 < after < total
    _monotonic_to(_record(storage, False), after)  # nothing left to delete


def _plain(*args: str) -> tuple[str, str]:
    runner = CliRunner(
        env={"COLUMNS": None, "TTY_COMPATIBLE": None, "FORCE_COLOR": None, "FLINKSTATE_DEBUG": ""}
    )
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout, result.stderr


def test_off_a_terminal_gc_prints_its_lines_and_nothing_else(local_job: Job) -> None:
    doc = json.loads(_plain("gc", local_job.root, "-r", "1", "--dry-run", "--json")[0])
    assert doc["files"] and not doc["young"] and not doc["undated"]
    for dry_run in (True, False):
        stdout, stderr = _plain("gc", local_job.root, "-r", "1", *(["--dry-run"] if dry_run else []))
        verb = "would delete" if dry_run else "deleted"
        lines = [
            f"keeping chk-3; {verb} {len(doc['files'])} files, {human_bytes(doc['bytes'])}",
            "file\tsize",
        ]
        lines += [f"{f['path']}\t{human_bytes(f['bytes'])}" for f in doc["files"]]
        assert (stdout, stderr) == ("".join(line + "\n" for line in lines), "")


def test_on_a_terminal_gc_and_verify_all_draw_bars(tmp_path: Path) -> None:
    root = str(tmp_path / "c")
    write_job(root, {}, versions=3)
    runner = CliRunner(env={"TTY_COMPATIBLE": "1", "NO_COLOR": "1", "COLUMNS": "120"})
    files = {  # each file once, however many manifests reference it
        posixpath.normpath(f"chk-{i}/{ref.path}"): ref.size
        for i in (1, 2, 3)
        for ref in open_checkpoint(root, checkpoint_id=i).manifest.files()
    }
    stored = sum(files.values())
    verified = runner.invoke(app, ["verify", root, "--all"])
    assert verified.exit_code == 0 and f"{stored / 1000:.1f}/{stored / 1000:.1f} kB" in verified.stderr
    total = _files_gc_looks_at(root, 3)
    planned = json.loads(runner.invoke(app, ["gc", root, "-r", "1", "--dry-run", "--json"]).stdout)
    collected = runner.invoke(app, ["gc", root, "-r", "1"])
    assert collected.exit_code == 0, collected.stderr
    deleted = len(planned["files"])
    for bar in (f"scanning .* {total}/{total} files", f"sizing .* {deleted}/{deleted} files",
                f"deleting .* {total}/{total} files"):  # fmt: skip
        assert any(re.search(bar, line) for line in collected.stderr.splitlines()), bar


CONVERTED = ["--operator", "counter", "--operator", "source", "-p", "3"]


def test_write_savepoint_hook_counts_each_subtask_encoded_then_written(
    local_job: Job, tmp_path: Path
) -> None:
    from flinkstate.checkpoint.flink import write_savepoint

    calls: list[tuple[int, int]] = []
    written: list[int] = []

    def hook(done: int, total: int) -> None:
        calls.append((done, total))
        written.append(sum(1 for p in (tmp_path / "sp").glob("*") if p.is_file()) if done else 0)

    write_savepoint(
        open_checkpoint(local_job.root), str(tmp_path / "sp"), operators=["counter", "source"],
        parallelism=3, inline_threshold=0, progress=hook,
    )  # fmt: skip
    _monotonic_to(calls, 2 * (3 + 3))
    assert written[6] == 0, "every subtask is encoded before any file is written"
    assert written[7] > 0 and written[-1] == len(list((tmp_path / "sp").glob("*"))) - 1  # all but _metadata


def test_convert_draws_a_bar_on_a_terminal_and_nothing_off_one(local_job: Job, tmp_path: Path) -> None:
    plain_target, bar_target = str(tmp_path / "plain"), str(tmp_path / "bar")
    stdout, stderr = _plain("convert", local_job.root, plain_target, "--to", "flink", *CONVERTED)
    assert stderr == "" and stdout.startswith(f"wrote Flink savepoint {plain_target} from checkpoint 3\n")
    assert stdout.splitlines()[1].startswith("operator\toperator id\tparallelism")
    runner = CliRunner(env={"TTY_COMPATIBLE": "1", "NO_COLOR": "1", "COLUMNS": "120"})
    for target, label in ((bar_target, "encoding, writing"), (str(tmp_path / "dry"), "encoding, checking")):
        dry = ["--dry-run"] if label.endswith("checking") else []
        result = runner.invoke(app, ["convert", local_job.root, target, "--to", "flink", *CONVERTED, *dry])
        assert result.exit_code == 0, result.stderr
        assert any(re.search(f"{label} .* 12/12 subtask steps", line) for line in result.stderr.splitlines())
