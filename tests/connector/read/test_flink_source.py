"""spark.read.format("flinkstate") on real Flink savepoints: views, options, pushdown."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from flink_model import FIXTURES, KEYS, LISTS, VALUES
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In

from flinkstate.connector.source import FlinkStateDataSource
from flinkstate.state.keygroups.assignment import assign_to_key_group
from flinkstate.state.types.mapping import Types

PATH = str(FIXTURES / "heap_canonical_files")


def _reader(path: str = PATH, **options: str) -> Any:
    source = FlinkStateDataSource({"path": path, **options})
    return source.reader(source.schema())


def _rows(reader: Any, partitions: Any = None) -> list[dict[str, Any]]:
    out = []
    for p in partitions if partitions is not None else reader.partitions():
        for batch in reader.read(p):
            out += pa.Table.from_batches([batch]).to_pylist()
    return out


def test_keyed_view_through_the_data_source() -> None:
    rows = _rows(_reader(operator="keyed-states", state="v_string"))
    assert {r["key"]: r["value"] for r in rows} == {k: VALUES["v_string"](k) for k in KEYS}


@pytest.mark.parametrize("kind", ["heap_canonical_files", "rocksdb_native", "rocksdb_checkpoint"])
def test_key_filter_reads_one_key_group_of_one_subtask(kind: str) -> None:
    reader = _reader(str(FIXTURES / kind), operator="keyed-states", state="l_long")
    assert list(reader.pushFilters([EqualTo(("key",), 7)])) == []
    parts = reader.partitions()
    group = assign_to_key_group(7, 128, Types.LONG())
    assert len(parts) == 1 and parts[0].key_groups == (group,)
    rows = _rows(reader, parts)
    assert [r["value"] for r in sorted(rows, key=lambda r: r["position"])] == LISTS["l_long"](7)


def test_key_group_range_and_options() -> None:
    reader = _reader(operator="keyed-states", state="v_long", keyGroups="0-2,100")
    assert list(reader.pushFilters([GreaterThanOrEqual(("key_group",), 64)])) == []
    parts = reader.partitions()
    assert [p.key_groups for p in parts] == [(100,)]
    expected = {k for k in KEYS if assign_to_key_group(k, 128, Types.LONG()) == 100}
    assert {r["key"] for r in _rows(reader, parts)} == expected
    reader = _reader(operator="keyed-states", state="v_long", keys="[3, 4]")
    assert sorted(r["key"] for r in _rows(reader)) == [3, 4]


def test_keys_of_a_row_key_state_filter_without_pruning() -> None:
    """PyFlink keys are Rows, in key groups our hash does not give: keys must not prune groups."""
    reader = _reader(
        str(FIXTURES / "pyflink"), operator="py-states", state="python-state-py_long", keys="[[3], [4]]"
    )
    assert all(p.key_groups is None for p in reader.partitions())
    assert sorted(r["key"]["f0"] for r in _rows(reader)) == [3, 4]


def test_operator_state_subtask_filter_and_metadata() -> None:
    reader = _reader(operator="operator-states", state="op_list")
    assert list(reader.pushFilters([In(("subtask",), (1,))])) == []
    assert [r["value"] for r in _rows(reader)] == [100, 101, 102]
    meta = _rows(_reader())
    assert {("keyed-states", "v_kryo", "FixtureJob$Opaque")} <= {
        (r["operator_uid"], r["name"], r["serializer"]) for r in meta
    }


def test_unsupported_options_are_refused() -> None:
    with pytest.raises(ValueError, match="not supported when reading a Flink savepoint"):
        _reader(operator="keyed-states", state="v_long", watermark="5")


def test_flatten_false_folds_lists_and_maps_only() -> None:
    """A value state reads the same either way; a list state one row per key with its list."""
    same = [_rows(_reader(operator="keyed-states", state="v_long", flatten=f)) for f in ("true", "false")]
    assert sorted(same[0], key=repr) == sorted(same[1], key=repr)
    rows = _rows(_reader(operator="keyed-states", state="l_long", flatten="false"))
    assert {r["key"]: r["value"] for r in rows} == {k: LISTS["l_long"](k) for k in KEYS}


@pytest.mark.spark
def test_spark_reads_a_flink_savepoint(spark: Any) -> None:
    df = spark.read.format("flinkstate").load(PATH)
    assert {r["name"] for r in df.collect()} >= {"v_long", "window-contents", "rules"}
    keyed = (
        spark.read.format("flinkstate")
        .option("operator", "keyed-states")
        .option("state", "v_pojo")
        .load(PATH)
    )
    got = {r["key"]: r["value"].asDict() for r in keyed.collect()}
    assert got == {k: VALUES["v_pojo"](k) for k in KEYS}
    one = keyed.filter("key = 5").collect()
    assert [r["value"]["name"] for r in one] == ["p5"]


@pytest.mark.spark
def test_spark_reads_list_state_of_a_native_savepoint(spark: Any) -> None:
    df = (
        spark.read.format("flinkstate")
        .option("operator", "keyed-states")
        .option("state", "l_string")
        .load(str(FIXTURES / "rocksdb_native"))
    )
    got: dict[int, list[str]] = {}
    for r in sorted(df.collect(), key=lambda r: (r["key"], r["position"])):
        got.setdefault(r["key"], []).append(r["value"])
    assert got == {k: LISTS["l_string"](k) for k in KEYS}


def test_float_key_filters_are_left_to_spark() -> None:
    """Spark's = has -0.0 = 0.0 and NaN = NaN, unlike keys: no reader may narrow by them."""
    from flinkstate.connector.read.pushdown import Pushdown

    for key_type in (Types.DOUBLE(), Types.FLOAT()):
        pushdown = Pushdown(keyed=True, key_type=key_type)
        filters = [EqualTo(("key",), 0.0), In(("key",), (-0.0, 1.5))]
        assert list(pushdown.push(filters)) == filters
        assert pushdown.key_sets == []


def test_keys_option_float_fields_compare_as_stored() -> None:
    """A FLOAT key field decodes as the float32 value widened; the option's number must match it."""
    from flinkstate.connector.read.savepoint_reader import _normal

    key_type = pa.struct([("name", pa.string()), ("score", pa.float32())])
    stored = pa.array([{"name": "zoë", "score": 0.1}], key_type)
    row = stored.to_pylist()[0]
    assert _normal(["zoë", 0.1], stored.type) == _normal(row, stored.type)
    assert _normal(0.1, pa.float32()) == pa.array([0.1], pa.float32()).to_pylist()[0]
