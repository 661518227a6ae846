"""``flinkstate convert --to flink`` of window state and timers: the committed savepoint of
``tests/fixtures/flink/written/windows`` (restored by Flink 2.3) converted again is the same
files, its windows and timers included."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Run

from flinkstate.checkpoint.flink import operator_id_hex

WINDOWS = Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "written" / "windows" / "savepoint"


def test_convert_windows_and_timers(run: Run, tmp_path: Path) -> None:
    target = tmp_path / "flink"
    args = ["convert", str(WINDOWS), str(target), "--to", "flink", "--inline-threshold", "1024", "--json"]
    doc = json.loads(run(*args).stdout)
    assert {o["operator_id"]: o["states"] for o in doc["operators"]} == {
        operator_id_hex("tumbling"): ["window-contents"],
        operator_id_hex("global"): ["window-contents"],
        operator_id_hex("timers"): [],
    }
    files = {p.name: p.read_bytes() for p in sorted(WINDOWS.iterdir())}
    assert {p.name: p.read_bytes() for p in sorted(target.iterdir())} == files
