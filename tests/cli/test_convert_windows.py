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
    found = {o["operator_id"]: o["states"] for o in doc["operators"]}
    per_window = ["w_agg", "w_list", "w_map", "w_reduce", "w_ttl_list", "w_ttl_map", "w_ttl_value", "w_value"]
    assert found == {
        operator_id_hex("tumbling"): sorted(["window-contents", *per_window]),
        operator_id_hex("global"): sorted(["window-contents", *per_window]),
        operator_id_hex("timers"): [],
    }
    files = {p.name: p.read_bytes() for p in sorted(WINDOWS.iterdir())}
    assert {p.name: p.read_bytes() for p in sorted(target.iterdir())} == files
