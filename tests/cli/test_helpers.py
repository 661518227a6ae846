"""What the command is built on: rewrite progress, storage options, redaction, JSON rendering."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pytest
from conftest import Job

from flinkstate.checkpoint import open_checkpoint
from flinkstate.checkpoint.storage import nested_options
from flinkstate.checkpoint.writing.rewrite import rewrite_max_parallelism
from flinkstate.cli.common import redact, secrets_of, storage_options
from flinkstate.cli.render import bar, duration, jsonable, sparkline
from flinkstate.state.errors import FlinkStateError


def test_rewrite_reports_progress_up_to_the_stored_rows(local_job: Job, tmp_path: Path) -> None:
    source = open_checkpoint(local_job.root)
    calls: list[tuple[int, int]] = []
    rewrite_max_parallelism(
        source, str(tmp_path / "sp"), 8, progress=lambda done, total: calls.append((done, total))
    )
    total = sum(
        r.rows
        for op in source.manifest.operators
        for st in op.subtasks
        for refs in st.keyed.values()
        for r in refs
    )
    assert calls and all(t == total for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and calls[-1][0] == total


def test_storage_options_nest_parse_json_and_refuse_conflicts() -> None:
    got = storage_options(
        ["key=abc", "client_kwargs.endpoint_url=http://h:1", "anon=false", 'token="123"', "n=3"]
    )
    assert got == {
        "key": "abc",
        "client_kwargs": {"endpoint_url": "http://h:1"},
        "anon": False,
        "token": "123",
        "n": 3,
    }
    for bad in (["Zq9"], ["=Zq9"], ["a=Zq9", "a.b=Zq9"], ["a.b=Zq9", "a=Zq9"], ["a..b=Zq9"]):
        with pytest.raises(FlinkStateError) as info:
            storage_options(bad)
        assert info.value.code == "INVALID_OPTION" and "Zq9" not in info.value.detail
    assert nested_options([("fs", "x")]) == {"fs": "x"}


def test_secrets_are_the_values_of_credential_keys() -> None:
    pairs = [
        "key=AKIAEXAMPLE",
        "secret=s3cr3t-value",
        "client_kwargs.endpoint_url=http://host:9000",
        "client_kwargs.aws_session_token=tok-123456",
        "anon=false",
        "secret=ab",
    ]
    secrets = secrets_of(pairs)
    assert set(secrets) == {"AKIAEXAMPLE", "s3cr3t-value", "tok-123456"}
    text = redact("url http://host:9000 key AKIAEXAMPLE secret s3cr3t-value tok-123456", secrets)
    assert text == "url http://host:9000 key *** secret *** ***"


def test_json_rendering_of_state_values() -> None:
    moment = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    assert jsonable(moment) == "2026-01-02T01:04:05+00:00"
    assert jsonable(b"\x00\xff") == [0, 255]
    assert jsonable([("a", 1), ("b", None)]) == {"a": 1, "b": None}  # an Arrow map with text keys
    assert jsonable([(1, "x")]) == [[1, "x"]]
    assert jsonable({"f": (1, decimal.Decimal("1.50"))}) == {"f": [1, "1.50"]}
    assert jsonable(float("nan")) == "nan" and jsonable(datetime.date(2026, 1, 2)) == "2026-01-02"
    assert duration(86_400_000) == "1d" and duration(5_400_000) == "1h30m" and duration(1500) == "1500ms"
    assert sparkline([0, 1, 8]) == " ▁█" and bar(0, 10) == "" and bar(10, 10, width=4) == "████"
    assert bar(8, 16, width=2) == "█" and bar(1, 16, width=2) == "▏" and bar(12, 16, width=2) == "█▌"
