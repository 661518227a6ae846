"""Bootstrap writes: DataFrame -> savepoint -> DataFrame, and savepoints the state engine restores."""

from __future__ import annotations

import datetime
import decimal
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.connector.write.batch import BootstrapWriter, TaskFiles
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)


def _write(df: Any, path: str, mode: str = "overwrite", **options: Any) -> None:
    writer = df.write.format("flinkstate").mode(mode).option("operator", "op")
    for k, v in options.items():
        writer = writer.option(k, v)
    writer.save(path)


def _read(spark: Any, path: str, state: str, **options: Any) -> Any:
    reader = spark.read.format("flinkstate").option("operator", "op").option("state", state)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(path)


@pytest.mark.connect
def test_value_round_trip_with_many_types(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "sp")
    rows = [
        (i, f"k{i}", i * 1.5, decimal.Decimal(i) / 4, datetime.date(2024, 1, 1 + i % 28), f"s{i}".encode(),
         [i, i + 1], {"a": i}, (i, None if i % 2 else "x"))
        for i in range(300)
    ]  # fmt: skip
    schema = (
        "user long, name string, score double, amount decimal(38,18), day date, raw binary, "
        "tags array<long>, attrs map<string,long>, nested struct<n: long, t: string>"
    )
    df = spark.createDataFrame(rows, schema).repartition(3)
    _write(
        df, path, state="profile", stateType="value", keyColumns="user", maxParallelism="64", parallelism="4"
    )
    back = _read(spark, path, "profile").collect()
    assert len(back) == 300
    by_key = {r.key: r for r in back}
    r7 = by_key[7].value
    assert (r7.name, r7.score, r7.amount, r7.day, r7.raw, r7.tags, r7.attrs) == (
        "k7",
        10.5,
        decimal.Decimal(7) / 4,
        datetime.date(2024, 1, 8),
        b"s7",
        [7, 8],
        {"a": 7},
    )
    assert (r7.nested.n, r7.nested.t) == (7, None)
    assert all(r.key_group == assign_to_key_group(r.key, 64) for r in back)
    meta = open_checkpoint(path).manifest.operators[0]
    assert (meta.parallelism, meta.max_parallelism, str(meta.key_type)) == (4, 64, "LONG")
    for st in meta.subtasks:  # every file holds only key groups of its subtask's range
        for ref in st.keyed["profile"]:
            assert st.key_group_range is not None
            assert all(st.key_group_range[0] <= kg <= st.key_group_range[1] for kg in ref.key_groups)


@pytest.mark.connect
def test_spark_written_state_restores_in_the_engine(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "sp")
    events = (
        spark.range(0, 2000)
        .selectExpr(
            "cast(id % 50 as int) as user", "id as item", "id % 7 as pos", "cast(id % 3 as string) as page"
        )
        .repartition(4)
    )
    _write(events.groupBy("user").count(), path, state="count", stateType="value", keyColumns="user")
    _write(events, path, "append", state="items", stateType="list", keyColumns="user", valueColumns="item")
    _write(
        events,
        path,
        "append",
        state="pages",
        stateType="map",
        keyColumns="user",
        userKeyColumn="page",
        valueColumns="item",
    )
    backend = open_checkpoint(path).keyed_backend("op", 0, 1)
    assert backend.key_type == Types.INT()
    backend.set_current_key(7)
    assert backend.get_state(ValueStateDescriptor("count", Types.LONG())).value() == 40
    items = backend.get_list_state(ListStateDescriptor("items", Types.LONG())).get()
    assert sorted(items) == list(range(7, 2000, 50))
    pages = dict(backend.get_map_state(MapStateDescriptor("pages", Types.STRING(), Types.LONG())).items())
    assert set(pages) == {"0", "1", "2"}
    assert sorted(r.state for r in spark.read.format("flinkstate").load(path).collect()) == [
        "count",
        "items",
        "pages",
    ]


def test_engine_state_reads_back_equal_in_spark(spark: Any, tmp_path: Path) -> None:
    b = HeapKeyedStateBackend()
    st = b.get_map_state(MapStateDescriptor("m", Types.STRING(), Types.LONG()))
    expected = {}
    for k in range(500):
        b.set_current_key(k)
        st.put_all({"x": k, "y": -k})
        expected[k] = {"x": k, "y": -k}
    pending = CheckpointStorage(str(tmp_path / "chk")).begin()
    pending.write_keyed("op", b)
    pending.commit()
    got = _read(spark, str(tmp_path / "chk"), "m", flatten="false").collect()
    assert {r.key: r.value for r in got} == expected


def test_list_positions_order_elements(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "sp")
    df = spark.createDataFrame(
        [(1, 3, "c"), (1, 1, "a"), (1, 2, "b"), (2, 1, "z")], "k long, pos int, v string"
    )
    # positions order the elements of a key within a task: partition by the key for a total order
    _write(
        df.repartition(2, "k"),
        path,
        state="l",
        stateType="list",
        keyColumns="k",
        valueColumns="v",
        positionColumn="pos",
    )
    got = {r.key: r.value for r in _read(spark, path, "l", flatten="false").collect()}
    assert got == {1: ["a", "b", "c"], 2: ["z"]}


@pytest.mark.connect
def test_operator_state_bootstrap(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "sp")
    _write(
        spark.range(0, 10).toDF("offset").repartition(3),
        path,
        state="offsets",
        stateType="split",
        parallelism="2",
    )
    _write(
        spark.createDataFrame([("r1", "on"), ("r2", "off")], "rule string, v string"),
        path,
        "append",
        state="rules",
        stateType="broadcast",
        keyColumns="rule",
        parallelism="2",
    )
    assert sorted(r.value for r in _read(spark, path, "offsets").collect()) == list(range(10))
    checkpoint = open_checkpoint(path)
    for p in (1, 3):
        ops = [checkpoint.operator_backend("op", i, p) for i in range(p)]
        got = [e for o in ops for e in o.get_list_state(ListStateDescriptor("offsets", Types.LONG())).get()]
        assert sorted(got) == list(range(10))
        for o in ops:
            rules = o.get_broadcast_state(MapStateDescriptor("rules", Types.STRING(), Types.STRING()))
            assert dict(rules.items()) == {"r1": "on", "r2": "off"}


def test_append_keeps_previous_version_and_references_files(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "sp")
    one = spark.createDataFrame([(1, 10)], "k long, v long")
    _write(one, path, state="a", stateType="value", keyColumns="k")
    _write(one, path, "append", state="b", stateType="value", keyColumns="k")
    _write(
        spark.createDataFrame([(1, 99)], "k long, v long"),
        path,
        "append",
        state="a",
        stateType="value",
        keyColumns="k",
    )
    assert [r.value for r in _read(spark, path, "a").collect()] == [99]
    assert [r.value for r in _read(spark, path, "a", checkpointId="1").collect()] == [10]
    latest = open_checkpoint(path).manifest
    b_files = [f.path for st in latest.operators[0].subtasks for f in st.keyed.get("b", ())]
    assert b_files and all(p.startswith("../chk-2/") for p in b_files)  # referenced, not copied
    _write(one, path, "overwrite", state="c", stateType="value", keyColumns="k")
    assert sorted(r.state for r in spark.read.format("flinkstate").load(path).collect()) == ["c"]


def test_write_without_mode_gets_sparks_error(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([(1, 1)], "k long, v long")
    writer = df.write.format("flinkstate").option("operator", "op").option("state", "s")
    with pytest.raises(Exception, match=r"(?i)mode|not supported|ErrorIfExists"):
        writer.option("stateType", "value").option("keyColumns", "k").save(str(tmp_path / "sp"))


@pytest.mark.connect
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"state": "s", "stateType": "value", "keyColumns": "nope"},
            r"column 'nope' is not in the DataFrame",
        ),
        ({"state": "s", "stateType": "tree", "keyColumns": "k"}, r"stateType must be one of"),
        ({"state": "s", "stateType": "value"}, r"keyColumns is required"),
        (
            {"state": "s", "stateType": "value", "keyColumns": "k", "colour": "x"},
            r"unknown write option.*colour",
        ),
        ({"state": "s", "stateType": "value", "keyColumns": "k", "parallelism": "300"}, r"parallelism"),
    ],
)
def test_bad_write_options(spark: Any, tmp_path: Path, options: dict[str, str], message: str) -> None:
    with pytest.raises(Exception, match=message):
        _write(spark.createDataFrame([(1, 1)], "k long, v long"), str(tmp_path / "sp"), **options)


def _writer(tmp_path: Path) -> BootstrapWriter:
    """A bootstrap writer driven by hand, as Spark drives it (no SparkSession needed)."""
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType([StructField("k", LongType()), StructField("v", LongType())])
    options = {
        "path": str(tmp_path / "sp"),
        "operator": "op",
        "state": "s",
        "statetype": "value",
        "keycolumns": "k",
    }
    return BootstrapWriter(options, schema, overwrite=True)


def _batch(keys: list[int]) -> pa.RecordBatch:
    return pa.record_batch([pa.array(keys), pa.array([k * 10 for k in keys])], names=["k", "v"])


def test_retried_and_speculative_tasks_never_duplicate_rows(tmp_path: Path) -> None:
    """Only files named in the commit messages are referenced; other attempts' files go."""
    writer = _writer(tmp_path)
    first: TaskFiles = writer.write(iter([_batch([1, 2, 3])]))  # a failed attempt: its files stay behind
    second: TaskFiles = writer.write(iter([_batch([1, 2, 3])]))  # the attempt Spark keeps
    assert {f.path for _, f in first.files}.isdisjoint(f.path for _, f in second.files)
    writer.commit([second])
    checkpoint = open_checkpoint(str(tmp_path / "sp"))
    assert sum(f.rows for f in checkpoint.manifest.files()) == 3
    listed = sorted(os.listdir(tmp_path / "sp" / "chk-1"))
    assert listed == sorted(["_metadata", *(f.path for f in checkpoint.manifest.files())])


def test_abort_deletes_the_attempts_files(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    writer.abort([writer.write(iter([_batch([1])]))])
    assert os.listdir(tmp_path / "sp" / "chk-1") == []


@pytest.mark.connect
def test_composite_key_round_trip(spark: Any, tmp_path: Path) -> None:
    """keyColumns="a,b": a ROW key, read back as a struct, restored as a tuple."""
    path = str(tmp_path / "sp")
    rows = [("alice", 1, "x", 1.5), ("b\u00f8b", 2, None, None), ("\U0001f600", -3, "\u00fc", 0.0),
            ("alice", 2, "y", None), ("alice", 1, "last", 9.0)]  # fmt: skip
    model: dict[tuple[str, int], tuple[str | None, float | None]] = {}
    for a, b, s, f in rows:  # the last row of a key wins
        model[(a, b)] = (s, f)
    df = spark.createDataFrame(rows, "a string, b long, s string, f double").coalesce(1)
    _write(df, path, state="v", stateType="value", keyColumns="a,b", maxParallelism="32", parallelism="2")
    back = {(r.key.a, r.key.b): (r.value.s, r.value.f) for r in _read(spark, path, "v").collect()}
    assert back == model
    checkpoint = open_checkpoint(path)
    key_type = Types.ROW_NAMED(["a", "b"], [Types.STRING(), Types.LONG()])
    value_type = Types.ROW_NAMED(["s", "f"], [Types.STRING(), Types.DOUBLE()])
    restored = {}
    for subtask in range(2):
        backend = checkpoint.keyed_backend("op", subtask, 2)
        state = backend.get_state(ValueStateDescriptor("v", value_type))
        for key in model:
            if assign_to_key_group(key, 32, key_type) in backend.key_group_range:
                backend.set_current_key(key)
                restored[key] = state.value()
    assert restored == model
