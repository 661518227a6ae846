"""df.write.format("flinkstate").option("format", "flink"): Flink savepoints written by Spark,
read back with read_savepoint and spark.read, against a model; flatten=false on Flink reads."""

from __future__ import annotations

import math
import os
import pickle
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from flink_model import FIXTURES, KEYS, LISTS, MAPS
from flink_restore import check_restored, compile_job, flink_lib, restore, spec_text
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType
from write_model import OperatorModel, StateModel

from flinkstate.checkpoint.flink import read_savepoint, write_savepoint
from flinkstate.connector.errors import OptionError
from flinkstate.connector.write.savepoint_writer import FlinkSavepointWriter
from flinkstate.state.types.canonical import key_token

WORDS = ["a", "é", "漢字😀", "", None]
ROWS = [(k % 7 - 3, WORDS[k % 5], [1.5, math.nan, -0.0, None, 2.0][k % 5], f"u{k % 3}") for k in range(40)]
SCHEMA = "user bigint, name string, score double, tag string"
STRUCT = StructType([StructField("user", LongType()), StructField("name", StringType()),
                     StructField("score", DoubleType()), StructField("tag", StringType())])  # fmt: skip
_ARROW = pa.schema(
    [("user", pa.int64()), ("name", pa.string()), ("score", pa.float64()), ("tag", pa.string())]
)


def _write(spark: Any, path: str, mode: str, **options: str) -> None:
    df = spark.createDataFrame(ROWS, SCHEMA).repartition(1).coalesce(1)
    writer = df.write.format("flinkstate").mode(mode).option("format", "flink")
    for k, v in {"operator": "op", "keyColumns": "user", "parallelism": "2", **options}.items():
        writer = writer.option(k, v)
    writer.save(path)


def _spark_rows(spark: Any, path: str, state: str, **options: str) -> list[dict[str, Any]]:
    reader = spark.read.format("flinkstate").option("operator", "op").option("state", state)
    for k, v in options.items():
        reader = reader.option(k, v)
    return [r.asDict(recursive=True) for r in reader.load(path).collect()]


def _model_values() -> dict[int, Any]:
    out: dict[int, Any] = {}
    for user, name, _, _ in ROWS:
        out[user] = name
    return {k: v for k, v in out.items() if v is not None}


def _model_lists() -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for user, _, score, _ in ROWS:
        if score is not None:
            out.setdefault(user, []).append(key_token(score))
    return out


def _model_maps() -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for user, name, _, tag in ROWS:
        out.setdefault(user, {})[tag] = name
    return out


@pytest.mark.connect
def test_spark_writes_a_flink_savepoint_of_several_states(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "sp")
    _write(spark, path, "overwrite", state="names", stateType="value", valueColumns="name",
           flinkKeyType="java.lang.Long", flinkValueType="java.lang.String")  # fmt: skip
    no_nulls = spark.createDataFrame([r for r in ROWS if r[2] is not None], SCHEMA).coalesce(1)
    (no_nulls.write.format("flinkstate").mode("append").option("format", "flink")
        .option("operator", "op").option("state", "scores").option("stateType", "list")
        .option("keyColumns", "user").option("valueColumns", "score").option("parallelism", "2")
        .option("flinkValueType", "double").save(path))  # fmt: skip
    _write(spark, path, "append", state="tags", stateType="map", userKeyColumn="tag", valueColumns="name")
    sp = read_savepoint(path)
    assert (sp.operator("op").parallelism, sp.operator("op").max_parallelism) == (2, 128)
    assert {s.name: s.kind for s in sp.states()} == {"names": "VALUE", "scores": "LIST", "tags": "MAP"}
    assert {r["key"]: r["value"] for r in sp.keyed_state("op", "names").to_pylist()} == _model_values()
    rows = _spark_rows(spark, path, "names")
    assert {r["key"]: r["value"] for r in rows} == _model_values()
    lists = {
        r["key"]: [key_token(v) for v in r["value"]]
        for r in _spark_rows(spark, path, "scores", flatten="false")
    }
    assert lists == _model_lists()
    flat = _spark_rows(spark, path, "scores")
    assert sorted((r["key"], r["position"], key_token(r["value"])) for r in flat) == sorted(
        (k, i, v) for k, vs in _model_lists().items() for i, v in enumerate(vs)
    )
    maps = {r["key"]: dict(r["value"]) for r in _spark_rows(spark, path, "tags", flatten="false")}
    assert maps == _model_maps()
    flat_maps: dict[int, dict[str, Any]] = {}
    for r in _spark_rows(spark, path, "tags"):
        flat_maps.setdefault(r["key"], {})[r["user_key"]] = r["value"]
    assert flat_maps == _model_maps()


@pytest.mark.connect
def test_a_value_not_fitting_its_declared_type_leaves_the_savepoint_as_it_was(
    spark: Any, tmp_path: Path
) -> None:
    path = str(tmp_path / "sp")
    _write(spark, path, "overwrite", state="names", stateType="value", valueColumns="name")
    before = {name: (tmp_path / "sp" / name).read_bytes() for name in os.listdir(path)}
    big = spark.createDataFrame([(1 << 40, "x", 1.0, "t")], SCHEMA)
    with pytest.raises(Exception, match=r"TYPE_MISMATCH.*key column\(s\) user.*not in range"):
        (big.write.format("flinkstate").mode("overwrite").option("format", "flink")
            .option("operator", "op").option("state", "names").option("stateType", "value")
            .option("keyColumns", "user").option("valueColumns", "name")
            .option("flinkKeyType", "java.lang.Integer").save(path))  # fmt: skip
    with pytest.raises(Exception, match=r"TYPE_MISMATCH.*value column\(s\) score"):
        _write(
            spark,
            path,
            "append",
            state="s",
            stateType="value",
            valueColumns="score",
            flinkValueType="java.lang.Long",
        )
    assert {name: (tmp_path / "sp" / name).read_bytes() for name in os.listdir(path)} == before
    assert {
        r["key"]: r["value"] for r in read_savepoint(path).keyed_state("op", "names").to_pylist()
    } == _model_values()


@pytest.mark.connect
def test_flatten_false_reads_flink_fixture_lists_and_maps(spark: Any) -> None:
    path = str(FIXTURES / "heap_canonical_files")
    for state, model in {**LISTS, **MAPS}.items():
        df = (spark.read.format("flinkstate").option("operator", "keyed-states").option("state", state)
              .option("flatten", "false").load(path))  # fmt: skip
        rows = [r.asDict(recursive=True) for r in df.collect()]
        got = {r["key"]: r["value"] for r in rows}
        assert got == {k: model(k) for k in KEYS}, state
        assert ("ttl_timestamp" in df.columns) == state.startswith("ttl"), state
    empty = (spark.read.format("flinkstate").option("operator", "keyed-states").option("state", "ttl_list")
             .option("flatten", "false").option("keys", "[-1]").load(path))  # fmt: skip
    assert empty.collect() == []
    assert empty.schema.simpleString() == (
        "struct<key_group:int,key:bigint,namespace:string,value:array<bigint>,ttl_timestamp:array<timestamp>>"
    )


def test_write_options_of_format_flink() -> None:
    schema = STRUCT
    base = {"path": "/nowhere", "operator": "op", "state": "s", "stateType": "value", "keyColumns": "user"}
    with pytest.raises(OptionError, match=r"\[INVALID_OPTION\].*need option format flink"):
        FlinkSavepointWriter({**base, "flinkValueType": "long"}, schema, True)
    with pytest.raises(OptionError, match=r"\[INVALID_OPTION\].*format must be one of"):
        FlinkSavepointWriter({**base, "format": "avro"}, schema, True)
    with pytest.raises(OptionError, match=r"\[INVALID_OPTION\].*\['retain'\] do not apply to format flink"):
        FlinkSavepointWriter({**base, "format": "flink", "retain": "2"}, schema, True)
    with pytest.raises(Exception, match=r"\[TYPE_MISMATCH\].*value column\(s\) name, score, tag"):
        FlinkSavepointWriter({**base, "format": "flink", "flinkValueType": "java.lang.String"}, schema, True)
    with pytest.raises(OptionError, match=r"\[INVALID_OPTION\].*flinkUserKeyType.*this is a value state"):
        FlinkSavepointWriter({**base, "format": "flink", "flinkUserKeyType": "long"}, schema, True)
    split = {**base, "format": "flink", "stateType": "split", "keyColumns": None, "valueColumns": "score"}
    with pytest.raises(OptionError, match=r"\[INVALID_OPTION\].*a split state has none"):
        FlinkSavepointWriter({**{k: v for k, v in split.items() if v}, "flinkKeyType": "long"}, schema, True)
    # several key columns are a Row key, which Flink's keyBy takes (placed by Row's hashCode)
    FlinkSavepointWriter(
        {**base, "format": "flink", "keyColumns": "user,tag", "valueColumns": "name"}, schema, True
    )


def test_format_flink_refuses_a_path_of_our_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "chk-1").mkdir()
    schema = STRUCT
    options = {"path": str(tmp_path), "format": "flink", "operator": "op", "state": "s", "stateType": "value",
               "keyColumns": "user", "valueColumns": "name"}  # fmt: skip
    with pytest.raises(OptionError, match=r"\[INVALID_PATH\].*holds our checkpoints"):
        FlinkSavepointWriter(options, schema, True)


@pytest.mark.flink
@pytest.mark.skipif(flink_lib() is None, reason="needs $FLINK_VENV with apache-flink 2.3 (make test-flink)")
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_flink_restores_a_savepoint_spark_wrote(spark: Any, tmp_path: Path, backend: str) -> None:
    """Value, list and map states written by Spark (declared and default types; nulls, unicode,
    NaN, -0.0), restored by a Java job in Flink 2.3 with every value the model's."""
    lib = flink_lib()
    assert lib is not None
    path = tmp_path / "sp"
    _write(spark, str(path), "overwrite", state="names", stateType="value", valueColumns="name",
           flinkValueType="java.lang.String")  # fmt: skip
    no_nulls = spark.createDataFrame([r for r in ROWS if r[2] is not None], SCHEMA).coalesce(1)
    (no_nulls.write.format("flinkstate").mode("append").option("format", "flink")
        .option("operator", "op").option("state", "scores").option("stateType", "list")
        .option("keyColumns", "user").option("valueColumns", "score").option("parallelism", "2")
        .save(str(path)))  # fmt: skip
    _write(
        spark, str(path), "append", state="tags", stateType="map", userKeyColumn="tag", valueColumns="name"
    )
    lists = {}
    for user, _, score, _ in ROWS:
        if score is not None:
            lists.setdefault(user, []).append(score)
    models = {
        "op": OperatorModel("LONG", {
            "names": StateModel("VALUE", "STRING", _model_values()),
            "scores": StateModel("LIST", "DOUBLE", lists),
            "tags": StateModel("MAP", "STRING", _model_maps(), "STRING"),
        })
    }  # fmt: skip
    classpath = compile_job(lib, tmp_path / "job")
    lines = restore(classpath, backend, path, spec_text({"op": 2}, {"op": 128}, models), tmp_path / "work")
    check_restored(lines, {"op": 2}, {"op": 128}, models)


def _tasks(writer: FlinkSavepointWriter, parts: list[dict[str, list[Any]]]) -> None:
    """Run the writer as Spark does: each task on a pickled copy (partition ids in order), then commit."""
    from unittest import mock

    messages = []
    for i, part in enumerate(parts):
        task = pickle.loads(pickle.dumps(writer))
        context = mock.Mock(partitionId=mock.Mock(return_value=i))
        with mock.patch("pyspark.TaskContext.get", return_value=context):
            messages.append(task.write(iter([pa.RecordBatch.from_pydict(part, schema=_ARROW)])))
    pickle.loads(pickle.dumps(writer)).commit(messages)


def test_positions_order_list_elements_and_later_partitions_win(tmp_path: Path) -> None:
    path = str(tmp_path / "sp")
    base = {"path": path, "format": "flink", "operator": "op", "keyColumns": "user", "parallelism": "3"}
    lists = {**base, "state": "l", "stateType": "list", "valueColumns": "name", "positionColumn": "score"}
    part = {
        "user": [1, 1, 2, 1],
        "name": ["c", "a", "x", "b"],
        "score": [3.0, 1.0, 0.0, 2.0],
        "tag": ["t"] * 4,
    }
    _tasks(FlinkSavepointWriter(lists, STRUCT, True), [part])
    rules = {**base, "state": "rules", "stateType": "broadcast", "keyColumns": "tag", "valueColumns": "name"}
    first = {"user": [1, 2], "name": ["old", "kept"], "score": [0.0, 0.0], "tag": ["k", "ü"]}
    second = {"user": [3], "name": ["new"], "score": [0.0], "tag": ["k"]}
    _tasks(FlinkSavepointWriter(rules, STRUCT, False), [first, second])
    sp = read_savepoint(path)
    nested = {r["key"]: r["value"] for r in nested_rows(sp, "l")}
    assert nested == {1: ["a", "b", "c"], 2: ["x"]}
    broadcast = sp.operator_state("op", "rules").to_pylist()
    assert {(r["key"], r["value"]) for r in broadcast} == {("k", "new"), ("ü", "kept")}
    assert {r["subtask"] for r in broadcast} == {0, 1, 2}


def nested_rows(sp: Any, state: str) -> list[dict[str, Any]]:
    from flinkstate.checkpoint.flink import nested_view

    return nested_view(sp.keyed_state("op", state)).to_pylist()


def _bits(x: float) -> bytes:
    """A float key as Flink compares keys: by its bits, every NaN the one canonical NaN."""
    return struct.pack(">d", math.nan if x != x else x)


def test_float_map_keys_are_compared_by_bits(spark: Any, tmp_path: Path) -> None:
    """0.0 and -0.0 are two user keys of one map (two value-state keys), every NaN is one."""
    floats = [0.0, -0.0, math.nan, struct.unpack(">d", b"\xff\xf8" + bytes(6))[0], 2.5]
    rows = [(k % 3, floats[k % 5], floats[(k * 2) % 5], k) for k in range(30)]
    df = spark.createDataFrame(rows, "user bigint, score double, ratio double, n bigint").coalesce(1)
    path = str(tmp_path / "sp")
    writes = [
        {"operator": "maps", "keyColumns": "user", "stateType": "map", "userKeyColumn": "score"},
        {"operator": "values", "keyColumns": "ratio", "stateType": "value"},
    ]
    for options in writes:
        writer = df.write.format("flinkstate").mode("append").option("format", "flink")
        for k, v in {"state": "s", "valueColumns": "n", **options}.items():
            writer = writer.option(k, v)
        writer.save(path)
    sp = read_savepoint(path)
    maps: dict[tuple[int, bytes], int] = {}
    values: dict[bytes, int] = {}
    for user, score, ratio, n in rows:
        maps[(user, _bits(score))] = n
        values[_bits(ratio)] = n
    got_maps = [
        ((r["key"], _bits(r["user_key"])), r["value"]) for r in sp.keyed_state("maps", "s").to_pylist()
    ]
    got_values = [(_bits(r["key"]), r["value"]) for r in sp.keyed_state("values", "s").to_pylist()]
    assert dict(got_maps) == maps and len(got_maps) == len(maps)
    assert dict(got_values) == values and len(got_values) == len(values)


def _formats(sp: Any) -> set[int]:
    """The format versions of a savepoint's operator state streams (5: Flink 1.13-1.17's, 6: later)."""
    return {
        int.from_bytes(sub.managed_operator.stream.read(sp.directory, sp.storage, 4))
        for op in sp.operators
        for sub in op.subtasks
        if sub.managed_operator is not None and sub.managed_operator.stream is not None
    }


def test_option_flink_version(tmp_path: Path) -> None:
    """flinkVersion names the release written for: a broadcast state for Flink 1.17 is in operator
    state format 5; appended to a Flink 1.17 savepoint without it, the savepoint stays 1.17's."""
    base = {"format": "flink", "operator": "op", "state": "rules", "stateType": "broadcast",
            "keyColumns": "tag", "valueColumns": "name"}  # fmt: skip
    with pytest.raises(OptionError, match=r"\[INVALID_OPTION\] option flinkVersion.*need"):
        FlinkSavepointWriter({**base, "path": "/nowhere", "format": "flinkstate", "flinkVersion": "1.17"},
                             STRUCT, True)  # fmt: skip
    with pytest.raises(OptionError, match=r"\[INVALID_OPTION\] option flinkVersion.*'0\.9'"):
        FlinkSavepointWriter({**base, "path": "/nowhere", "flinkVersion": "0.9"}, STRUCT, True)
    part = {"user": [1, 2], "name": ["a", "漢字😀"], "score": [0.0, 0.0], "tag": ["k", "ü"]}
    for version, format_version in (("1.17", 5), ("1.18", 6), (None, 6)):
        path = str(tmp_path / f"sp-{version}")
        options = {**base, "path": path, **({"flinkVersion": version} if version else {})}
        _tasks(FlinkSavepointWriter(options, STRUCT, True), [part])
        sp = read_savepoint(path)
        assert _formats(sp) == {format_version}
        assert {(r["key"], r["value"]) for r in sp.operator_state("op", "rules").to_pylist()} == {
            ("k", "a"),
            ("ü", "漢字😀"),
        }
    old = tmp_path / "old"
    write_savepoint(read_savepoint(str(FIXTURES / "1.17" / "heap_canonical")), str(old),
                    operators=["operator-states"])  # fmt: skip
    assert _formats(read_savepoint(str(old))) == {5}
    _tasks(FlinkSavepointWriter({**base, "path": str(old)}, STRUCT, False), [part])
    appended = read_savepoint(str(old))
    assert _formats(appended) == {5} and len(appended.operators) == 2
