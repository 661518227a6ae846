"""Savepoints written from DataFrames, restored and compared with plain Python models.

The data source's writer, sink and reader are driven as Spark drives them (each table
is one task, in partition order), without a JVM, so many cases run in a few seconds.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from flinkstate.checkpoint import open_checkpoint
from flinkstate.connector.source import FlinkStateDataSource
from flinkstate.connector.write.stream import COMPACT_AFTER, StateSink
from flinkstate.state import (
    FlinkStateError,
    ListStateDescriptor,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
)


def _options(path: Path, **options: str) -> dict[str, str]:
    return {k.lower(): v for k, v in {"path": str(path), "operator": "op", **options}.items()}


def write(path: Path, tasks: list[pa.Table], overwrite: bool = True, **options: str) -> None:
    """A batch write: one task per table, committed in partition order (a task that fails
    aborts the job, as Spark does)."""
    source = FlinkStateDataSource(_options(path, **options))
    writer = source.writer(from_arrow_schema(tasks[0].schema), overwrite)
    messages = []
    for partition, table in enumerate(tasks):
        try:
            message = writer.write(iter(table.to_batches()))
        except Exception:
            writer.abort(messages)
            raise
        message.partition = partition
        messages.append(message)
    writer.commit(messages)


def stream_batch(path: Path, batch_id: int, tasks: list[pa.Table], **options: str) -> None:
    """One streaming micro-batch: one task per table."""
    sink = StateSink(_options(path, **options), from_arrow_schema(tasks[0].schema))
    messages = []
    for partition, table in enumerate(tasks):
        message = sink.write(iter(table.to_batches()))
        message.partition = partition
        messages.append(message)
    sink.commit(messages, batch_id)


def read(path: Path, **options: str) -> list[dict[str, Any]]:
    """Every row ``spark.read.format("flinkstate")`` gives, as dicts."""
    source = FlinkStateDataSource(_options(path, **options))
    schema = source.schema()
    reader = source.reader(schema)
    batches = [b for p in reader.partitions() for b in reader.read(p)]
    arrow = to_arrow_schema(schema, timezone="UTC")
    return pa.Table.from_batches(batches, schema=arrow).to_pylist() if batches else []


# -- broadcast state: one map, the same on every subtask ------------------------------

RULES = MapStateDescriptor("rules", Types.STRING(), Types.LONG())


def test_broadcast_from_several_tasks_is_one_map_on_every_subtask(tmp_path: Path) -> None:
    rng = random.Random(7)
    keys = ["r1", "r2", "régle", "ルール", "\U0001f600"]
    tasks = []
    for _ in range(4):
        n = rng.randrange(0, 6)
        rules = [rng.choice(keys) for _ in range(n)]
        values = [None if rng.random() < 0.2 else rng.randrange(100) for _ in range(n)]
        tasks.append(pa.table({"rule": pa.array(rules, pa.string()), "v": pa.array(values, pa.int64())}))
    model: dict[str, int | None] = {}  # partitions in order, rows in order: a later row wins
    for table in tasks:
        for row in table.to_pylist():
            model[row["rule"]] = row["v"]
    path = tmp_path / "sp"
    write(path, tasks, state="rules", stateType="broadcast", keyColumns="rule", valueColumns="v",
          parallelism="3")  # fmt: skip
    checkpoint = open_checkpoint(str(path))
    copies = [[f.path for f in st.broadcast["rules"]] for st in checkpoint.manifest.operators[0].subtasks]
    assert len(copies) == 3 and len(copies[0]) == 1 and all(c == copies[0] for c in copies)  # one map
    assert sorted((r["key"], r["value"]) for r in read(path, state="rules")) == sorted(model.items())
    for parallelism in (1, 2, 3, 5):
        for subtask in range(parallelism):
            ops = checkpoint.operator_backend("op", subtask, parallelism)
            assert dict(ops.get_broadcast_state(RULES).items()) == model
    listed = sorted(p.name for p in (path / "chk-1").iterdir())
    assert listed == sorted({"_metadata", *(f.path for f in checkpoint.manifest.files())})  # tasks' gone


def test_broadcast_with_row_keys_from_several_tasks(tmp_path: Path) -> None:
    rows = [("a", 1, "x"), ("b", 2, "y"), ("a", 1, "z"), ("a", 2, "ü")]
    tasks = [
        pa.table({"name": [r[0] for r in part], "n": pa.array([r[1] for r in part], pa.int64()),
                  "v": [r[2] for r in part]})
        for part in (rows[:2], rows[2:])
    ]  # fmt: skip
    path = tmp_path / "sp"
    write(path, tasks, state="rules", stateType="broadcast", keyColumns="name,n", valueColumns="v")
    desc = MapStateDescriptor("rules", Types.ROW_NAMED(["name", "n"], [Types.STRING(), Types.LONG()]),
                              Types.STRING())  # fmt: skip
    got = dict(open_checkpoint(str(path)).operator_backend("op", 0, 1).get_broadcast_state(desc).items())
    assert got == {("a", 1): "z", ("b", 2): "y", ("a", 2): "ü"}


def test_value_and_map_keys_in_several_tasks_keep_their_last_row(tmp_path: Path) -> None:
    rng = random.Random(3)
    keys = ["a", "ä", "鍵", "\U0001f511"]
    tasks = []
    for _ in range(3):
        n = rng.randrange(1, 7)
        tasks.append(pa.table({
            "k": [rng.choice(keys) for _ in range(n)],
            "u": [rng.choice(["x", "ÿ"]) for _ in range(n)],
            "s": [rng.choice([None, "s", "ß"]) for _ in range(n)],
            "n": pa.array([rng.choice([None, rng.randrange(9)]) for _ in range(n)], pa.int64()),
        }))  # fmt: skip
    values: dict[str, tuple[str | None, int | None]] = {}
    maps: dict[str, dict[str, str | None]] = {}
    for table in tasks:  # partitions in order, rows in order
        for row in table.to_pylist():
            values[row["k"]] = (row["s"], row["n"])
            maps.setdefault(row["k"], {})[row["u"]] = row["s"]
    path = tmp_path / "sp"
    write(path, tasks, state="v", stateType="value", keyColumns="k", valueColumns="s,n", parallelism="2")
    write(path, tasks, overwrite=False, state="m", stateType="map", keyColumns="k", userKeyColumn="u",
          valueColumns="s", parallelism="2")  # fmt: skip
    checkpoint = open_checkpoint(str(path))
    value_desc = ValueStateDescriptor("v", Types.ROW_NAMED(["s", "n"], [Types.STRING(), Types.LONG()]))
    map_desc = MapStateDescriptor("m", Types.STRING(), Types.STRING())
    got_values, got_maps = {}, {}
    for subtask in range(2):
        backend = checkpoint.keyed_backend("op", subtask, 2)
        for key in backend.get_keys("v", None):
            backend.set_current_key(key)
            got_values[key] = backend.get_state(value_desc).value()
            got_maps[key] = dict(backend.get_map_state(map_desc).items())
    assert got_values == values
    assert got_maps == maps


# -- list state: deletes, appends and null elements --------------------------------------

LIST = ListStateDescriptor("l", Types.LONG())
LIST_OPTIONS = {"state": "l", "stateType": "list", "keyColumns": "k", "valueColumns": "v", "opColumn": "op"}


def _restored_lists(path: Path, keys: list[str]) -> dict[str, list[int]]:
    backend = open_checkpoint(str(path)).keyed_backend("op", 0, 1)
    state = backend.get_list_state(LIST)
    out = {}
    for key in keys:
        backend.set_current_key(key)
        got = state.get()
        if got is not None and list(got):
            out[key] = list(got)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_streaming_list_ops_apply_in_order(tmp_path: Path, seed: int) -> None:
    """Random appends and deletes per key, within and across batches and tasks, against a
    model that applies the rows in order (partition order, then row order)."""
    rng = random.Random(seed)
    keys = ["k", "ключ", "鍵", "\U0001f511", "k2"]
    model: dict[str, list[int]] = {}
    path = tmp_path / "out"
    for batch_id in range(COMPACT_AFTER + 4):  # past compaction too
        tasks = []
        for _ in range(rng.randrange(1, 4)):
            rows: list[tuple[str, int | None, str]] = []
            for _ in range(rng.randrange(0, 8)):
                key = rng.choice(keys)
                if rng.random() < 0.25:
                    rows.append((key, None, "delete"))
                    model.pop(key, None)
                else:
                    rows.append((key, value := rng.randrange(1000), "upsert"))
                    model.setdefault(key, []).append(value)
            tasks.append(pa.table({"k": pa.array([r[0] for r in rows], pa.string()),
                                   "v": pa.array([r[1] for r in rows], pa.int64()),
                                   "op": pa.array([r[2] for r in rows], pa.string())}))  # fmt: skip
        stream_batch(path, batch_id, tasks, **LIST_OPTIONS)
        read_back = read(path, state="l", flatten="false")
        assert {r["key"]: r["value"] for r in read_back} == model, f"batch {batch_id}"
        assert len(read_back) == len(model)
        assert _restored_lists(path, keys) == model, f"batch {batch_id}"


def test_streaming_list_delete_then_append_in_one_batch(tmp_path: Path) -> None:
    path = tmp_path / "out"

    def batch(batch_id: int, rows: list[tuple[int, int | None, str]]) -> None:
        keys, values, ops = zip(*rows, strict=True)
        table = pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array(values, pa.int64()), "op": ops})
        stream_batch(path, batch_id, [table], **LIST_OPTIONS, ttl="3600000")

    batch(0, [(1, 10, "upsert"), (2, 20, "upsert")])
    batch(1, [(1, 11, "upsert"), (1, None, "delete"), (1, 12, "upsert"), (2, None, "delete")])
    assert sorted((r["key"], r["position"], r["value"]) for r in read(path, state="l")) == [(1, 0, 12)]
    feed = read(path, state="l", readChangeFeed="true", changeStartCheckpointId="2")
    assert [(r["key"], r["position"], r["value"], r["change_type"]) for r in feed] == [
        (1, None, None, "delete"),
        (1, 0, 12, "update"),
        (2, None, None, "delete"),
    ]


def test_null_list_elements_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "sp"
    options = dict(state="l", stateType="list", keyColumns="k", valueColumns="v", positionColumn="pos")
    good = pa.table({"k": pa.array([1, 1], pa.int64()), "pos": pa.array([2, 1], pa.int64()), "v": ["b", "á"]})
    write(path, [good], **options)
    bad = pa.table({"k": pa.array([1, 1, 1], pa.int64()), "pos": pa.array([3, 1, 2], pa.int64()),
                    "v": pa.array(["c", "a", None])})  # fmt: skip
    for overwrite in (True, False):
        with pytest.raises(FlinkStateError, match=r"NULL_ELEMENT.*column v") as info:
            write(path, [good, bad], overwrite=overwrite, **options)
        assert info.value.code == "NULL_ELEMENT"
        assert [p.name for p in (path / "chk-2").iterdir()] == []  # nothing written
    assert [(r["key"], r["value"]) for r in read(path, state="l")] == [(1, "á"), (1, "b")]
    backend = open_checkpoint(str(path)).keyed_backend("op", 0, 1)
    backend.set_current_key(1)
    assert list(backend.get_list_state(ListStateDescriptor("l", Types.STRING())).get()) == ["á", "b"]
    with pytest.raises(FlinkStateError, match="NULL_ELEMENT"):
        write(tmp_path / "ops", [pa.table({"v": pa.array([1, None], pa.int64())})], state="s",
              stateType="split")  # fmt: skip


def test_streaming_null_element_is_refused_but_a_delete_row_may_be_null(tmp_path: Path) -> None:
    path = tmp_path / "out"
    ok = pa.table({"k": pa.array([1, 1], pa.int64()), "v": pa.array([5, None], pa.int64()),
                   "op": ["upsert", "delete"]})  # fmt: skip
    stream_batch(path, 0, [ok], **LIST_OPTIONS)
    bad = pa.table({"k": pa.array([1], pa.int64()), "v": pa.array([None], pa.int64()), "op": ["upsert"]})
    with pytest.raises(FlinkStateError, match=r"NULL_ELEMENT.*column v"):
        stream_batch(path, 1, [bad], **LIST_OPTIONS)
    assert read(path, state="l") == []


# -- namespaces that are structs --------------------------------------------------------


class Window(NamedTuple):
    start: int
    end: int


def test_list_state_with_a_struct_namespace_round_trips(tmp_path: Path) -> None:
    window = pa.struct([("start", pa.int64()), ("end", pa.int64())])
    rows = [(1, (0, 10), 1), (1, (0, 10), 2), (1, (10, 20), 3), (2, (0, 10), 4), (1, (0, 10), 5)]
    table = pa.table({
        "k": pa.array([r[0] for r in rows], pa.int64()),
        "w": pa.array([{"start": r[1][0], "end": r[1][1]} for r in rows], window),
        "v": pa.array([r[2] for r in rows], pa.int64()),
    })  # fmt: skip
    model: dict[tuple[int, tuple[int, int]], list[int]] = {}
    for key, ns, value in rows:
        model.setdefault((key, ns), []).append(value)
    path = tmp_path / "sp"
    write(path, [table.slice(0, 3), table.slice(3)], state="l", stateType="list", keyColumns="k",
          valueColumns="v", namespaceColumn="w")  # fmt: skip
    got: dict[tuple[int, tuple[int, int]], list[int]] = {}
    for r in read(path, state="l"):
        got.setdefault((r["key"], (r["namespace"]["start"], r["namespace"]["end"])), []).append(r["value"])
    assert got == model
    backend = open_checkpoint(str(path)).keyed_backend("op", 0, 1)
    for (key, ns), values in model.items():
        backend.set_current_key(key)
        assert list(backend.get_partitioned_state(Window(*ns), LIST).get()) == values
