"""Reads of checkpoints against models: a restore of the same checkpoint, or plain Python.

Spark-written checkpoints are written and read by driving the data source as Spark's tasks
do (one Arrow table per task, no SparkSession): rows of one key can be split across tasks
and interleaved with other keys of their key group.
"""

from __future__ import annotations

import datetime
import json
from collections import namedtuple
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.connector.source import FlinkStateDataSource
from flinkstate.connector.write.batch import TaskFiles
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.ttl import ManualTimeProvider
from flinkstate.state.types.mapping import BasicTypeInfo, RowTypeInfo


def _write(path: Path, tasks: list[pa.Table], **options: str) -> str:
    """``tasks`` written as Spark's tasks would write them, one table each, then committed."""
    opts = {k.lower(): v for k, v in {"path": str(path), "operator": "op", **options}.items()}
    writer = FlinkStateDataSource(opts).writer(from_arrow_schema(tasks[0].schema), True)
    messages = []
    for i, table in enumerate(tasks):
        message = writer.write(iter(table.to_batches()))
        assert isinstance(message, TaskFiles)
        message.partition = i
        messages.append(message)
    writer.commit(messages)
    return str(path)


def _tasks(table: pa.Table, split: list[int]) -> list[pa.Table]:
    """``table``'s rows cut into tasks of ``split`` rows each, in order."""
    starts = np.cumsum([0, *split[:-1]])
    return [table.slice(int(start), n) for start, n in zip(starts, split, strict=True)]


def _read(path: str, schema: str | None = None, **options: str) -> list[dict[str, Any]]:
    opts = {k.lower(): v for k, v in {"path": path, "operator": "op", **options}.items()}
    source = FlinkStateDataSource(opts)
    spark_schema = source.schema() if schema is None else _subset(source.schema(), schema)
    reader = source.reader(spark_schema)
    batches = [b for p in reader.partitions() for b in reader.read(p)]
    arrow = to_arrow_schema(spark_schema, timezone="UTC")
    return pa.Table.from_batches(batches, schema=arrow).to_pylist()


def _subset(full: Any, names: str) -> Any:
    from pyspark.sql.types import StructType

    return StructType([full[n] for n in names.split(",")])


def _same_group_keys(count: int) -> list[str]:
    """``count`` unicode keys of one key group (max parallelism 128)."""
    by_group: dict[int, list[str]] = {}
    for i in range(10_000):
        key = f"ключ-{i}-é"
        members = by_group.setdefault(assign_to_key_group(key, 128, Types.STRING()), [])
        members.append(key)
        if len(members) == count:
            return members
    raise AssertionError("no key group holds enough keys")


def _restored_map(path: str, keys: list[str]) -> dict[str, dict[str, Any]]:
    backend = open_checkpoint(path).keyed_backend("op", subtask=0, parallelism=1)
    state = backend.get_map_state(MapStateDescriptor("m", Types.STRING(), Types.LONG()))
    out = {}
    for key in keys:
        backend.set_current_key(key)
        entries = dict(state.items())
        if entries:
            out[key] = entries
    return out


MAP = {"state": "m", "stateType": "map", "keyColumns": "k", "userKeyColumn": "uk", "valueColumns": "v"}


@pytest.mark.parametrize("split", [[4], [1, 3], [2, 2], [1, 1, 1, 1]])
def test_map_unflattened_one_row_per_key_when_rows_interleave(tmp_path: Path, split: list[int]) -> None:
    a, b = _same_group_keys(2)
    table = pa.table(
        {"k": [a, b, a, b], "uk": ["x", "y", "z", "ü"], "v": pa.array([1, 2, None, 4], pa.int64())}
    )
    path = _write(tmp_path / "sp", _tasks(table, split), **MAP)
    rows = _read(path, state="m", flatten="false")
    assert sorted(r["key"] for r in rows) == [a, b]  # one row per key
    assert {r["key"]: dict(r["value"]) for r in rows} == _restored_map(path, [a, b])


VALUE = {"state": "v", "stateType": "value", "keyColumns": "k", "valueColumns": "v"}


@pytest.mark.parametrize("split", [[5], [2, 3], [1, 1, 1, 1, 1]])
@pytest.mark.parametrize("columns", [None, "key", "key,value"])
def test_null_values_store_nothing_however_tasks_split(
    tmp_path: Path, split: list[int], columns: str | None
) -> None:
    keys = ["ä", "ä", "b", "ç", "ç"]
    values = [10, None, None, None, 7]
    table = pa.table({"k": keys, "v": pa.array(values, pa.int64())})
    path = _write(tmp_path / "sp", _tasks(table, split), **VALUE)
    backend = open_checkpoint(path).keyed_backend("op", subtask=0, parallelism=1)
    state = backend.get_state(ValueStateDescriptor("v", Types.LONG()))
    restored = {}
    for key in set(keys):
        backend.set_current_key(key)
        if state.value() is not None:
            restored[key] = state.value()
    rows = _read(path, columns, state="v")
    assert sorted(r["key"] for r in rows) == sorted(restored)
    if columns != "key":
        assert {r["key"]: r["value"] for r in rows} == restored


@pytest.mark.parametrize("split", [[5], [2, 3], [1, 1, 1, 1, 1]])
def test_broadcast_state_reads_as_the_map_a_restore_gives(tmp_path: Path, split: list[int]) -> None:
    table = pa.table(
        {"rule": ["r1", "règle", "r1", "r3", "règle"], "v": pa.array([1, 2, 3, None, 5], pa.int64())}
    )
    options = {"state": "rules", "stateType": "broadcast", "keyColumns": "rule", "valueColumns": "v"}
    path = _write(tmp_path / "sp", _tasks(table, split), **options, parallelism="2")
    rows = _read(path, state="rules")
    for subtask in range(2):
        backend = open_checkpoint(path).operator_backend("op", subtask=subtask, parallelism=2)
        restored = dict(
            backend.get_broadcast_state(MapStateDescriptor("rules", Types.STRING(), Types.LONG())).items()
        )
        assert sorted((r["key"], r["value"]) for r in rows) == sorted(restored.items())


def test_ttl_list_positions_count_live_elements(tmp_path: Path) -> None:
    now = int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)
    ttl = 3_600_000
    clock = ManualTimeProvider(now - 2 * ttl)
    backend = HeapKeyedStateBackend(key_type=Types.STRING(), time_provider=clock)
    desc = ListStateDescriptor("l", Types.STRING())
    desc.enable_time_to_live(
        StateTtlConfig.new_builder(datetime.timedelta(milliseconds=ttl))
        .disable_cleanup_in_background()
        .build()
    )
    state = backend.get_list_state(desc)
    for key, old in (("mixed", ["a", "b"]), ("gone", ["c"]), ("fresh", [])):
        backend.set_current_key(key)
        state.add_all(old)
    clock.now = now - 1000
    for key, new in (("mixed", ["ü", None]), ("fresh", ["d", "e"])):
        backend.set_current_key(key)
        state.add_all([e for e in new if e is not None])
    pending = CheckpointStorage(str(tmp_path / "chk")).begin()
    pending.write_keyed("op", backend)
    pending.commit()
    path = str(tmp_path / "chk")
    nested = {r["key"]: r["value"] for r in _read(path, state="l", flatten="false")}
    assert nested == {"mixed": ["ü"], "fresh": ["d", "e"]}
    flat = sorted((r["key"], r["position"], r["value"]) for r in _read(path, state="l"))
    assert flat == sorted((k, i, v) for k, vs in nested.items() for i, v in enumerate(vs))


Person = namedtuple("Person", ["name", "score"])


def test_keys_option_on_a_row_key_with_a_float_field(tmp_path: Path) -> None:
    key_type = RowTypeInfo((BasicTypeInfo("STRING"), BasicTypeInfo("FLOAT")), ("name", "score"))
    backend = HeapKeyedStateBackend(key_type=key_type, max_parallelism=128)
    state = backend.get_state(ValueStateDescriptor("v", Types.LONG()))
    people = [
        Person("alice", 0.5),
        Person("bob", 0.1),
        Person("zoë", 2.7),
        Person("zoë", -0.0),
        Person("zoë", 0.0),
    ]
    for i, person in enumerate(people):
        backend.set_current_key(person)
        state.update(i)
    pending = CheckpointStorage(str(tmp_path / "chk")).begin()
    pending.write_keyed("op", backend)
    pending.commit()
    path = str(tmp_path / "chk")
    everything = _read(path, state="v")
    for wanted in (
        [["bob", 0.1]],
        [{"name": "zoë", "score": 2.7}, ["alice", 0.5]],
        [["zoë", 0.0]],
        [["bob", 0.2]],
    ):
        pairs = [(w["name"], w["score"]) if isinstance(w, dict) else tuple(w) for w in wanted]
        model = {(n, np.float32(s).tobytes()) for n, s in pairs}  # the FLOAT a key stores, bit for bit
        expected = [
            r for r in everything if (r["key"]["name"], np.float32(r["key"]["score"]).tobytes()) in model
        ]
        got = _read(path, state="v", keys=json.dumps(wanted))
        assert sorted(got, key=repr) == sorted(expected, key=repr)
        assert got or wanted == [["bob", 0.2]]
