"""Off a terminal (a file, a pipe into ``grep``) every command prints names, keys and paths
whole, one record per line; on a terminal (``TTY_COMPATIBLE=1``) the rich tables stay.

The names here are longer than the 80 columns rich assumes off a terminal, in unicode, so
a wrapped, cut or bordered line is a line ``grep NAME`` does not find.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.cli import app
from flinkstate.state import (
    HeapKeyedStateBackend,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)

MAX_P = 32
P = 2
UID = "Ωmega-Übersicht-" + "very-long-operator-uid-" * 9 + "😀"
STATE = "Zähler-" + "ß" * 40 + "-" + "x" * 180
MAP_STATE = "Ränge-" + "m" * 210
KEYS = [f"schlüssel-{i}-" + "ü" * 120 + "-" + "k" * 90 + f"-{i}" for i in range(6)] + ["tab\tkey"]
USER_KEY = "benutzer-" + "u" * 230


def run(*args: str, code: int = 0) -> Result:
    """The command as a pipe runs it: no terminal, no ``COLUMNS``."""
    runner = CliRunner(
        env={"COLUMNS": None, "TTY_COMPATIBLE": None, "FORCE_COLOR": None, "FLINKSTATE_DEBUG": ""}
    )
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


@dataclass(frozen=True)
class LongJob:
    root: str
    keys: list[str]


def _grep(output: str, text: str) -> list[str]:
    """The lines holding ``text``, as ``grep -F`` finds them."""
    return [line for line in output.splitlines() if text in line]


def _write(root: str, version: int) -> None:
    storage = CheckpointStorage(root, retain=10)
    pending = storage.begin()
    count = ValueStateDescriptor(STATE, Types.LONG())
    ranks = MapStateDescriptor(MAP_STATE, Types.STRING(), Types.STRING())
    for i in range(P):
        rng = compute_key_group_range_for_operator_index(MAX_P, P, i)
        backend = HeapKeyedStateBackend(key_type=Types.STRING(), max_parallelism=MAX_P, key_group_range=rng)
        for n, key in enumerate(KEYS):
            if assign_to_key_group(key, MAX_P, Types.STRING()) in rng:
                backend.set_current_key(key)
                backend.get_state(count).update(n * 10 + version)
                backend.get_map_state(ranks).put(USER_KEY, key)
        pending.write_subtask(UID, i, P, MAX_P, keyed=backend)
    pending.commit()


@pytest.fixture
def long_job(tmp_path: Path) -> LongJob:
    root = tmp_path / ("verzeichnis-ünï-😀-" + "d" * 120) / ("prüfpunkte-" + "c" * 90)
    for version in (1, 2):
        _write(str(root), version)
    past = 1_000_000_000  # 2001: older than any grace period a cleanup may keep files for
    for directory, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(directory, name), (past, past))
    return LongJob(str(root), KEYS)


def test_list_inspect_skew_print_names_whole(long_job: LongJob) -> None:
    listed = run("list", long_job.root).stdout
    assert _grep(listed, long_job.root) and _grep(listed, UID)
    assert len(_grep(listed, UID)) == 2  # one line per checkpoint
    inspected = run("inspect", long_job.root).stdout
    assert _grep(inspected, f"{long_job.root}/chk-2")
    assert _grep(inspected, UID) and _grep(inspected, STATE) and _grep(inspected, MAP_STATE)
    assert "…" not in inspected and "│" not in inspected
    skewed = run("skew", long_job.root, UID, STATE).stdout
    assert _grep(skewed, f"{UID} / {STATE}")


def test_show_prints_each_key_on_one_line(long_job: LongJob) -> None:
    out = run("show", long_job.root, UID, STATE, "--limit", "0").stdout
    for key in long_job.keys[:-1]:
        assert len(_grep(out, key)) == 1
    assert len(_grep(out, "tab\\tkey")) == 1  # a tab inside a key is escaped, not a cell break
    rows = [line for line in out.splitlines() if line.count("\t") == 2]  # key_group, key, value
    assert len(rows) == len(long_job.keys) + 1  # the header and one line per key
    mapped = run("show", long_job.root, UID, MAP_STATE, "--limit", "0").stdout
    assert len(_grep(mapped, USER_KEY)) == len(long_job.keys)
    assert all(len(_grep(mapped, key)) == 1 for key in long_job.keys[:-1])


def test_verify_names_the_damaged_file_on_one_line(long_job: LongJob) -> None:
    chk = Path(long_job.root) / "chk-2"
    damaged = sorted(p.name for p in chk.iterdir() if p.name.endswith(".parquet"))[0]
    data = (chk / damaged).read_bytes()
    (chk / damaged).write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    out = run("verify", long_job.root, code=1).stdout
    lines = _grep(out, damaged)
    assert len(lines) == 1 and lines[0].startswith("chk-2\t")
    assert len(damaged) > 80


def test_rescale_and_gc_print_paths_whole(long_job: LongJob, tmp_path: Path) -> None:
    target = str(tmp_path / ("ziel-ünï-" + "t" * 220))
    out = run("rescale", long_job.root, target, "--max-parallelism", "64").stdout
    assert _grep(out, target) and len(_grep(out, UID)) == 1
    planned = json.loads(run("gc", long_job.root, "--retain", "1", "--dry-run", "--json").stdout)
    files = [f["path"] for f in planned["files"]]
    assert len([name for name in files if len(name) > 80]) == 2 * 2  # two states of two subtasks
    out = run("gc", long_job.root, "--retain", "1").stdout
    for name in files:
        assert len(_grep(out, name)) == 1


def test_a_terminal_keeps_the_tables(long_job: LongJob) -> None:
    runner = CliRunner(env={"COLUMNS": "100", "TTY_COMPATIBLE": "1", "FLINKSTATE_DEBUG": ""})
    result = runner.invoke(app, ["inspect", long_job.root])
    assert result.exit_code == 0, result.stdout
    assert "│" in result.stdout
    assert not _grep(result.stdout, UID)  # folded to the terminal's width
