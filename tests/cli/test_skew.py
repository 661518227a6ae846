"""``skew``: entries per key group from the model, bytes from the files' footers, subtasks, PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import MAX_P, USERS, Job, P, Run, model

from flinkstate.checkpoint import open_checkpoint
from flinkstate.checkpoint.storage import Storage
from flinkstate.state import Types, assign_to_key_group, compute_key_group_range_for_operator_index


def _model_rows(state: str) -> dict[int, int]:
    """Entries per key group as the model predicts them (MAP: one per map entry)."""
    out = dict.fromkeys(range(MAX_P), 0)
    for key, value in model(3)[state].items():
        out[assign_to_key_group(key, MAX_P, Types.STRING())] += len(value) if state == "totals" else 1
    return out


def _footer_bytes(job: Job, states: list[str]) -> dict[int, int]:
    """Compressed bytes per key group, read from every file's footer with pyarrow directly."""
    checkpoint = open_checkpoint(job.root, job.options)
    out = dict.fromkeys(range(MAX_P), 0)
    directory = Storage(job.root, job.options).child(f"chk-{checkpoint.checkpoint_id}")
    for st in checkpoint.operator("counter").subtasks:
        for state in states:
            for ref in st.keyed[state]:
                with directory.open_input(ref.path) as f:
                    metadata = pq.ParquetFile(f).metadata
                for index in range(metadata.num_row_groups):
                    group = metadata.row_group(index)
                    kgs = [k for k, (rg, _) in ref.key_groups.items() if rg == index]
                    assert len(kgs) == 1
                    out[kgs[0]] += sum(
                        group.column(c).total_compressed_size for c in range(group.num_columns)
                    )
    return out


def test_one_state_per_key_group_and_subtask(job: Job, run: Run) -> None:
    doc: dict[str, Any] = json.loads(run("skew", job.root, "counter", "totals", "--json", *job.args).stdout)
    rows = _model_rows("totals")
    got = {g["key_group"]: g for g in doc["key_groups"]}
    assert {kg: g["entries"] for kg, g in got.items()} == rows
    assert {kg: g["bytes"] for kg, g in got.items()} == _footer_bytes(job, ["totals"])
    assert doc["parallelism"] == doc["current_parallelism"] == P and doc["max_parallelism"] == MAX_P
    assert doc["entries"] == sum(rows.values()) and doc["states"] == ["totals"]
    for s in doc["subtasks"]:
        rng = compute_key_group_range_for_operator_index(MAX_P, P, s["subtask"])
        assert s["key_groups"] == [rng.start, rng.end]
        assert s["entries"] == sum(rows[kg] for kg in rng)
        assert s["bytes"] == sum(got[kg]["bytes"] for kg in rng)
        assert all(got[kg]["subtask"] == s["subtask"] for kg in rng)


def test_a_proposed_parallelism_and_the_hottest_key_groups(local_job: Job, run: Run, tmp_path: Path) -> None:
    png = tmp_path / "skew.png"
    result = run("skew", local_job.root, "counter", "-p", "5", "--top", "3", "--json", "--png", str(png))
    doc: dict[str, Any] = json.loads(result.stdout)
    assert doc["states"] == ["count", "events", "totals", "seen"] and doc["parallelism"] == 5
    assert [s["key_groups"] for s in doc["subtasks"]] == [
        [r.start, r.end] for r in (compute_key_group_range_for_operator_index(MAX_P, 5, i) for i in range(5))
    ]
    every = _footer_bytes(local_job, ["count", "events", "totals", "seen"])
    assert sum(s["bytes"] for s in doc["subtasks"]) == doc["bytes"] == sum(every.values())
    hot = assign_to_key_group("hot", MAX_P, Types.STRING())
    assert doc["hottest"][0]["key_group"] == hot == max(every, key=lambda kg: every[kg])
    assert [h["bytes"] for h in doc["hottest"]] == sorted(every.values(), reverse=True)[:3]
    rows = {kg: sum(_model_rows(s)[kg] for s in ("count", "totals")) for kg in range(MAX_P)}
    for kg in range(MAX_P):  # events: one row per key; seen: every third user
        rows[kg] += sum(1 for u in USERS if assign_to_key_group(u, MAX_P, Types.STRING()) == kg)
        rows[kg] += sum(1 for u in model(3)["seen"] if assign_to_key_group(u, MAX_P, Types.STRING()) == kg)
    assert {g["key_group"]: g["entries"] for g in doc["key_groups"]} == rows
    biggest = max(s["bytes"] for s in doc["subtasks"])
    assert doc["imbalance"]["bytes"] == pytest.approx(biggest / (doc["bytes"] / 5))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert f"wrote {png}" in result.stderr


def test_terminal_picture(local_job: Job, run: Run) -> None:
    text = run("skew", local_job.root, "counter", "count", "-p", "4").stdout
    assert "per subtask at parallelism 4 (current: 2)" in text
    assert "hottest key groups (of 32)" in text and "bytes per key group" in text and "█" in text


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["source"], "NO_KEYED_STATE"),
        (["counter", "nope"], "UNKNOWN_STATE"),
        (["counter", "-p", "99"], "INVALID_PARALLELISM"),
    ],
)
def test_skew_errors(local_job: Job, run: Run, args: list[str], code: str) -> None:
    assert run("skew", local_job.root, *args, code=3).stderr.startswith(f"[{code}]")
