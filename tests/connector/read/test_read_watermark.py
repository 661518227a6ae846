"""Event-time TTL when reading: by default a read hides what a restore of the checkpoint
treats as expired, judged at the watermark the checkpoint records (the backend's, or the
process runner's); the ``watermark`` option overrides it. The model is a restore."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.cli import app
from flinkstate.connector import process
from flinkstate.connector.source import FlinkStateDataSource
from flinkstate.state import StateTtlConfig, Types, ValueStateDescriptor

import process_functions
from process_functions import LastEventTime

DAY = 24 * 3600 * 1000
TTL = StateTtlConfig.new_builder(timedelta(days=1)).use_event_time().disable_cleanup_in_background().build()
WATERMARK = 10 * DAY + DAY // 2
KEYS = {"a": 0, "b": 2 * DAY, "c": 10 * DAY}  # key -> the watermark it was last written at


def _descriptor() -> ValueStateDescriptor:
    desc = ValueStateDescriptor("last", Types.LONG())
    desc.enable_time_to_live(TTL)
    return desc


def _job(make_backend: Any, root: Path, incremental: bool) -> int:
    """Two subtasks at slightly different watermarks (the checkpoint records the least)."""
    storage = CheckpointStorage(str(root), incremental=incremental)
    backends = [make_backend(key_type=Types.STRING(), max_parallelism=8, key_group_range=rng)
                for rng in _ranges()]  # fmt: skip
    for key, at in sorted(KEYS.items(), key=lambda kv: kv[1]):
        for b in backends:
            b.advance_watermark(at)
        backend = _owner(backends, key)
        backend.set_current_key(key)
        backend.get_state(_descriptor()).update(at)
    backends[0].advance_watermark(WATERMARK)
    backends[1].advance_watermark(WATERMARK + 5)
    pending = storage.begin()
    for i, b in enumerate(backends):
        pending.write_keyed("op", b, subtask=i, parallelism=2)
    return pending.commit().checkpoint_id


def _ranges() -> list[Any]:
    from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index

    return [compute_key_group_range_for_operator_index(8, 2, i) for i in range(2)]


def _owner(backends: list[Any], key: str) -> Any:
    from flinkstate.state import assign_to_key_group

    return next(b for b in backends if assign_to_key_group(key, 8) in b.key_group_range)


def _read(root: Path, **extra: str) -> list[tuple[str, int]]:
    options = {"path": str(root), "operator": "op", "state": "last", **extra}
    source = FlinkStateDataSource({k.lower(): v for k, v in options.items()})
    reader = source.reader(source.schema())
    batches = [b for p in reader.partitions() for b in reader.read(p)]  # type: ignore[attr-defined]
    rows = pa.Table.from_batches(batches).to_pylist() if batches else []
    return sorted((r["key"], r["value"]) for r in rows)


def _restored(root: Path) -> list[tuple[str, int]]:
    """What restores (at parallelism 1 and 2) answer for every key."""
    checkpoint = CheckpointStorage(str(root)).load()
    answers = set()
    for parallelism in (1, 2):
        for i in range(parallelism):
            backend = checkpoint.keyed_backend("op", i, parallelism)
            state = backend.get_state(_descriptor())
            for key in KEYS:
                if assign_in(backend, key):
                    backend.set_current_key(key)
                    if state.value() is not None:
                        answers.add((key, state.value()))
            backend.close()
    return sorted(answers)


def assign_in(backend: Any, key: str) -> bool:
    from flinkstate.state import assign_to_key_group

    return assign_to_key_group(key, 8) in backend.key_group_range


@pytest.mark.parametrize("incremental", [False, True])
def test_a_read_hides_what_a_restore_treats_as_expired(
    make_backend: Any, tmp_path: Path, incremental: bool
) -> None:
    _job(make_backend, tmp_path, incremental)
    assert CheckpointStorage(str(tmp_path)).load().manifest.watermark("op") == WATERMARK
    live = [("c", 10 * DAY)]  # 'a' and 'b' are more than a day behind the watermark
    assert _restored(tmp_path) == live
    assert _read(tmp_path) == live
    assert _read(tmp_path, watermark=str(2 * DAY)) == [("b", 2 * DAY), ("c", 10 * DAY)]  # overrides
    assert _read(tmp_path, includeExpired="true") == sorted(KEYS.items())
    shown = CliRunner().invoke(app, ["show", str(tmp_path), "op", "last", "-f", "json"])
    assert shown.exit_code == 0, shown.output
    assert sorted((r["key"], r["value"]) for r in json.loads(shown.stdout)) == live
    shown = CliRunner().invoke(app, ["show", str(tmp_path), "op", "last", "-f", "json", "--watermark", "0"])
    assert sorted((r["key"], r["value"]) for r in json.loads(shown.stdout)) == sorted(KEYS.items())


def test_without_a_watermark_nothing_is_hidden(make_backend: Any, tmp_path: Path) -> None:
    """A backend whose watermark never moved records none (a processing-time job)."""
    backend = make_backend(key_type=Types.STRING(), max_parallelism=8)
    backend.get_state(ValueStateDescriptor("last", Types.LONG()))
    storage = CheckpointStorage(str(tmp_path))
    pending = storage.begin()
    pending.write_keyed("op", backend)
    checkpoint = pending.commit()
    assert checkpoint.manifest.watermark("op") is None
    assert checkpoint.manifest.operator("op").subtasks[0].watermark is None  # type: ignore[union-attr]


def test_a_spark_read_after_process_hides_what_the_run_expired(spark: Any, tmp_path: Path) -> None:
    """The process runner records its watermark (10 days): 'a', written at watermark -1, is expired."""

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(process_functions)  # the workers do not import tests
    df = spark.createDataFrame([("a", 0), ("b", 10 * DAY)], "user string, ts bigint")
    process(
        df, "user", LastEventTime(), "x string", str(tmp_path), "op", event_time="ts", parallelism=1
    ).collect()
    load = spark.read.format("flinkstate").option("operator", "op").option("state", "last")
    assert [(r["key"], r["value"]) for r in load.load(str(tmp_path)).collect()] == [("b", 10 * DAY)]
    rows = load.option("watermark", str(DAY - 2)).load(str(tmp_path)).collect()
    assert sorted((r["key"], r["value"]) for r in rows) == [("a", 0), ("b", 10 * DAY)]
