"""``flinkstate convert --to flink --flink-version 2.3`` of Flink 1.20's MigrateJob savepoint:
with ``--type`` its Kryo class and POJO List fields re-encoded (read back equal); ``--dry-run``
listing each state, writing nothing; undeclared states refused by name with their declaration."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import Run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "checkpoint" / "flink"))  # the job's model
from migrate_model import COUNTED, KEYS, LISTED, TYPES, counted, listed, pojo

from flinkstate.checkpoint.flink import read_savepoint

SOURCE = str(Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "1.20" / "migrate_heap")
TO_23 = ["--to", "flink", "--flink-version", "2.3"]
DECLARED = [arg for name, ddl in TYPES.items() for arg in ("--type", f"{name}={ddl}")]


def test_convert_with_declarations_migrates_every_value(run: Run, tmp_path: Path) -> None:
    target = tmp_path / "migrated"
    run("convert", SOURCE, str(target), *TO_23, *DECLARED)
    back = read_savepoint(
        str(target), types={"kryo_listed": LISTED, "kryo_counted": COUNTED}, flink_version="2.3"
    )
    for state, model in (("kryo_listed", listed), ("kryo_counted", counted), ("pojo_listed", pojo)):
        assert {r["key"]: r["value"] for r in back.state("migrate", state).to_pylist()} == {
            k: model(k) for k in KEYS
        }


def test_dry_run_lists_each_state_and_writes_nothing(run: Run, tmp_path: Path) -> None:
    target = tmp_path / "migrated"
    done = run("convert", SOURCE, str(target), *TO_23, *DECLARED, "--dry-run", "--json")
    states = {s["state"]: s["action"] for s in json.loads(done.stdout)["states"]}
    assert states["kryo_listed"] == states["kryo_counted"] == states["pojo_listed"] == "re-encoded"
    assert not target.exists()
    refused = run("convert", SOURCE, str(target), *TO_23, "--dry-run", "--json", code=3)
    rows = {s["state"]: s for s in json.loads(refused.stdout)["states"]}
    assert rows["pojo_listed"]["action"] == rows["kryo_listed"]["action"] == "refused"
    assert "--type pojo_listed='STRUCT<tags: ARRAY<STRING>>'" in rows["pojo_listed"]["detail"]
    assert "[FLINK_UNSUPPORTED] 3 of 5 states would be refused" in refused.stderr
    assert not target.exists()


def test_an_undeclared_state_is_refused_before_any_file(run: Run, tmp_path: Path) -> None:
    target = tmp_path / "migrated"
    declared = ["--type", f"kryo_listed={LISTED}", "--type", f"kryo_counted={COUNTED}"]
    done = run("convert", SOURCE, str(target), *TO_23, *declared, code=3)
    assert "state 'pojo_listed'" in done.stderr and "STRUCT<tags: ARRAY<STRING>>" in done.stderr
    assert not target.exists()
    bad = run("convert", SOURCE, str(target), *TO_23, "--type", "kryo_listed", code=3)
    assert "[INVALID_OPTION] --type expects STATE=TYPE" in bad.stderr
