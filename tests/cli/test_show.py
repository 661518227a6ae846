"""``show``: every kind of state against the model; ``--key`` reads only the keys' key groups."""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import MAX_P, ORDER_KEY, ORDERS, USERS, Job, Run, model

from flinkstate.checkpoint import open_checkpoint
from flinkstate.checkpoint.storage import Storage
from flinkstate.state import Types, assign_to_key_group


def rows_of(run: Run, job: Job, *args: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(
        run("show", job.root, *args, *job.args, "--format", "json").stdout
    )
    return rows


def test_value_list_map_and_ttl_states_equal_the_model(local_job: Job, run: Run) -> None:
    want = model(3)
    count = rows_of(run, local_job, "counter", "count")
    assert {r["key"]: r["value"] for r in count} == want["count"]
    assert all(r["key_group"] == assign_to_key_group(r["key"], MAX_P, Types.STRING()) for r in count)
    assert [r["key_group"] for r in count] == sorted(r["key_group"] for r in count)
    events = rows_of(run, local_job, "counter", "events")
    got: dict[str, list[str]] = {}
    for r in events:
        assert r["position"] == len(got.setdefault(r["key"], []))
        got[r["key"]].append(r["value"])
    assert got == want["events"]
    nested = rows_of(run, local_job, "counter", "events", "--no-flatten")
    assert {r["key"]: r["value"] for r in nested} == want["events"]
    totals = rows_of(run, local_job, "counter", "totals", "--no-flatten")
    assert {r["key"]: r["value"] for r in totals} == want["totals"]
    flat = rows_of(run, local_job, "counter", "totals")
    assert len(flat) == sum(len(v) for v in want["totals"].values())
    seen = rows_of(run, local_job, "counter", "seen")
    assert {r["key"]: r["value"] for r in seen} == want["seen"]
    assert all(re.match(r"\d{4}-\d\d-\d\dT.*\+00:00$", r["ttl_timestamp"]) for r in seen)
    older = rows_of(run, local_job, "counter", "count", "--checkpoint-id", "1")
    assert {r["key"]: r["value"] for r in older} == model(1)["count"]


def test_expired_entries_are_hidden_unless_asked(
    local_job: Job, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    later = time.time() + 2 * 86400  # the TTL is one day
    monkeypatch.setattr(time, "time", lambda: later)
    assert rows_of(run, local_job, "counter", "seen") == []
    assert len(rows_of(run, local_job, "counter", "seen", "--include-expired")) == len(model(3)["seen"])


def test_row_keys_as_json_arrays_or_objects(job: Job, run: Run) -> None:
    want = model(3)["amount"]
    everything = rows_of(run, job, "orders", "amount")
    assert {(r["key"]["region"], r["key"]["id"]): r["value"] for r in everything} == want
    picked = rows_of(run, job, "orders", "amount", "--key", '["eu", 3]', "--key", '{"region": "us", "id": 4}')
    assert {(r["key"]["region"], r["key"]["id"]): r["value"] for r in picked} == {
        ("eu", 3): want[("eu", 3)],
        ("us", 4): want[("us", 4)],
    }
    groups = {assign_to_key_group(k, MAX_P, ORDER_KEY) for k in [("eu", 3), ("us", 4)]}
    assert {r["key_group"] for r in picked} == groups
    assert rows_of(run, job, "orders", "amount", "--key", '["eu", 999]') == []


def test_text_keys_bare_or_quoted_unicode_included(local_job: Job, run: Run) -> None:
    want = model(3)["count"]
    rows = rows_of(
        run, local_job, "counter", "count", "-k", "user-7", "-k", '"hot"', "-k", "ünï-😀", "-k", "nobody"
    )
    assert {r["key"]: r["value"] for r in rows} == {k: want[k] for k in ("user-7", "hot", "ünï-😀")}


def test_a_key_reads_only_its_key_group(job: Job, run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    real = Storage.open_input

    def spy(self: Storage, relative: str) -> Any:
        opened.append(relative)
        return real(self, relative)

    monkeypatch.setattr(Storage, "open_input", spy)
    result = run("show", job.root, "counter", "events", "-k", "hot", "--stats", "-f", "json", *job.args)
    rows = json.loads(result.stdout)
    assert [r["value"] for r in rows] == model(3)["events"]["hot"]
    checkpoint = open_checkpoint(job.root, job.options)
    op = checkpoint.operator("counter")
    kg = assign_to_key_group("hot", MAX_P, Types.STRING())
    holding = [r for st in op.subtasks for r in st.keyed["events"] if kg in r.key_groups]
    assert len(holding) == 1 and sorted(set(opened)) == [holding[0].path]
    stats = re.search(
        r"read (\d+) bytes in (\d+) files \(the state has (\d+) bytes in (\d+) files\)", result.stderr
    )
    assert stats is not None
    read, files, total, total_files = map(int, stats.groups())
    assert files == 1 and total_files == 2
    # read: the footer's length, the footer, and the key group's row group; nothing else
    with Storage(job.root, job.options).child("chk-3").open_input(holding[0].path) as f:
        footer = pq.ParquetFile(f).metadata
        f.seek(holding[0].size - 8)
        footer_length = int.from_bytes(f.read(4), "little")
    group = footer.row_group(holding[0].key_groups[kg][0])
    row_group = sum(group.column(c).total_compressed_size for c in range(group.num_columns))
    assert 8 + footer_length + row_group <= read <= 8 + footer_length + row_group + 64
    assert read < holding[0].size < total


def test_operator_states_by_subtask_and_broadcast_once(local_job: Job, run: Run) -> None:
    offsets = rows_of(run, local_job, "source", "offsets")
    assert [(r["subtask"], r["position"], r["value"]) for r in offsets] == [
        (s, j, s * 100 + j) for s in range(2) for j in range(3)
    ]
    assert sorted(r["value"] for r in rows_of(run, local_job, "source", "sources")) == [
        "source-0",
        "source-1",
    ]
    assert rows_of(run, local_job, "source", "rules") == [
        {"key": "a", "value": "1"},
        {"key": "b", "value": "2"},
    ]
    result = run("show", local_job.root, "source", "rules", "--key", "a", code=3)
    assert result.stderr.startswith("[INVALID_ARGUMENT] --key selects keyed state")


def test_csv_table_and_limits(local_job: Job, run: Run) -> None:
    text = run("show", local_job.root, "counter", "totals", "--no-flatten", "-f", "csv").stdout
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert {r["key"]: json.loads(r["value"]) for r in parsed} == model(3)["totals"]
    assert all(r["namespace"] == "" for r in parsed)
    assert len(rows_of(run, local_job, "counter", "count", "--limit", "5")) == 5
    table = run("show", local_job.root, "counter", "count").stdout
    assert "50 rows (the first 50; --limit 0 shows all)" in table and "namespace" not in table
    assert f"{len(USERS)} rows" in run("show", local_job.root, "counter", "count", "--limit", "0").stdout
    assert len(ORDERS) == len(rows_of(run, local_job, "orders", "amount", "-n", "0"))


@pytest.mark.parametrize(
    ("args", "code", "start"),
    [
        (["counter", "nope"], "UNKNOWN_STATE", "operator 'counter' has no state 'nope'"),
        (["nobody", "count"], "UNKNOWN_OPERATOR", "no operator 'nobody'"),
        (["orders", "amount", "-k", "eu"], "INVALID_ARGUMENT", "--key 'eu' is not JSON"),
        (
            ["orders", "amount", "-k", "[1, 2]"],
            "INVALID_OPTION",
            "option --key: key [1, 2] is not a STRING key",
        ),
    ],
)
def test_bad_input_is_one_line_with_its_code(
    local_job: Job, run: Run, args: list[str], code: str, start: str
) -> None:
    result = run("show", local_job.root, *args, code=3)
    assert result.stdout == ""
    assert result.stderr.startswith(f"[{code}] {start}") and result.stderr.count("\n") == 1
