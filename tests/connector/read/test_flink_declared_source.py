"""spark.read.format("flinkstate") on Flink SQL RowData state and with declared types
(options valueType, userKeyType, stateType, types)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from flink_model import FIXTURES
from sql_model import RICH_DDL, accumulators, last_row, rich

from flinkstate.connector.errors import OptionError
from flinkstate.connector.options import ReadOptions
from flinkstate.connector.source import FlinkStateDataSource

SQL = str(FIXTURES / "sql_heap_checkpoint")
PYFLINK = str(FIXTURES / "pyflink")


def _rows(path: str, **options: str) -> list[dict[str, Any]]:
    source = FlinkStateDataSource({"path": path, **options})
    reader = source.reader(source.schema())
    out = []
    for p in reader.partitions():
        for batch in reader.read(p):
            out += pa.Table.from_batches([batch]).to_pylist()
    return out


def test_rowdata_state_through_the_data_source() -> None:
    rows = _rows(SQL, operator="10_group-aggregate", state="accState")
    got = {r["key"]["f0"]: r["value"] for r in rows}
    assert got == {k: accumulators(k) for k in range(20)}


def test_keys_option_on_rowdata_keys_reads_only_their_key_groups() -> None:
    full = _rows(SQL, operator="4_deduplicate", state="deduplicate-state")
    groups = {r["key"]["f0"]: r["key_group"] for r in full}
    source = FlinkStateDataSource(
        {"path": SQL, "operator": "4_deduplicate", "state": "deduplicate-state", "keys": "[[3], [11]]"}
    )
    reader = source.reader(source.schema())
    parts = reader.partitions()
    assert sorted(g for p in parts for g in p.key_groups) == sorted({groups[3], groups[11]})
    rows = [r for p in parts for b in reader.read(p) for r in pa.Table.from_batches([b]).to_pylist()]
    assert sorted(r["key"]["f0"] for r in rows) == [3, 11]
    assert all(r["value"]["f2"] == last_row(r["key"]["f0"])["f2"] for r in rows)
    two = _rows(
        SQL,
        operator="10_group-aggregate",
        state="accState",
        keys=json.dumps([[4, "n4-\u00e9\u6f22\U0001f600"]]),
    )
    assert [(r["key"]["f0"], r["value"]["f0"]) for r in two] == [(4, 2)]


def test_options_declare_a_kryo_state_and_reach_the_states_after_it() -> None:
    rows = _rows(SQL, operator="kryo-states", state="k_rich", valueType=RICH_DDL)
    assert {r["key"]: r["value"] for r in rows} == {k: rich(k) for k in range(20)}
    after = _rows(SQL, operator="kryo-states", state="k_after", types=json.dumps({"k_rich": RICH_DDL}))
    assert {r["key"]: r["value"] for r in after} == {k: f"a{k}" for k in range(20)}
    with pytest.raises(Exception, match=r"\[UNSUPPORTED_SERIALIZER\].*k_rich"):
        _rows(SQL, operator="kryo-states", state="k_after")


def test_options_declare_pyflink_state() -> None:
    longs = _rows(PYFLINK, operator="py-states", state="py_long", valueType="BIGINT", keys="[3, 4]")
    assert {r["key"]: r["value"] for r in longs} == {3: 33, 4: 44}
    lists = _rows(PYFLINK, operator="py-states", state="py_list", valueType="BIGINT", stateType="list")
    assert sorted((r["key"], r["position"], r["value"]) for r in lists) == [
        (k, p, k + p) for k in range(10) for p in range(2)
    ]
    maps = _rows(PYFLINK, operator="py-states", state="py_map", valueType="BIGINT", userKeyType="STRING")
    assert {(r["key"], r["user_key"], r["value"]) for r in maps} == {(k, "a", k) for k in range(10)}
    rows = _rows(
        PYFLINK, operator="py-states", state="py_row", valueType="STRUCT<a: BIGINT, b: STRING, c: DOUBLE>"
    )
    assert {r["key"]: r["value"]["a"] for r in rows} == {k: 7 * k for k in range(10)}
    pickled = _rows(
        PYFLINK, operator="py-states", state="py_pickled", valueType="PICKLED", allowPickle="true"
    )
    assert {r["key"]: pickle.loads(r["value"]) for r in pickled} == {k: {"k": k} for k in range(10)}
    with pytest.raises(Exception, match=r"\[PICKLE_NOT_ALLOWED\]"):
        _rows(PYFLINK, operator="py-states", state="py_pickled", valueType="PICKLED")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"operator": "o", "state": "s", "valueType": "STRUCT<a INT"}, "cannot parse the type"),
        ({"valueType": "BIGINT"}, "name it with option state"),
        ({"operator": "o", "state": "s", "userKeyType": "BIGINT"}, "need option valueType"),
        ({"operator": "o", "state": "s", "valueType": "BIGINT", "stateType": "split"}, "stateType"),
        ({"types": "[1]"}, "JSON object"),
        ({"types": "{nope"}, "JSON object"),
    ],
)
def test_bad_declaring_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=rf"\[INVALID_OPTION\].*{message}"):
        ReadOptions.parse({"path": SQL, **options})


def test_declarations_that_do_not_fit_are_invalid_options(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"\[INVALID_OPTION\].*k_after.*comes from the savepoint"):
        _rows(SQL, operator="kryo-states", state="k_after", valueType="STRING")
    with pytest.raises(Exception, match=r"\[INVALID_OPTION\].*py_long.*declare its type"):
        _rows(PYFLINK, operator="py-states", state="py_long")
    with pytest.raises(OptionError, match=r"\[INVALID_OPTION\].*not a Flink savepoint"):
        FlinkStateDataSource(
            {"path": str(tmp_path), "operator": "o", "state": "s", "valueType": "INT"}
        ).schema()


@pytest.mark.spark
def test_spark_reads_rowdata_and_declared_kryo(spark: Any) -> None:
    df = (
        spark.read.format("flinkstate")
        .option("operator", "4_deduplicate")
        .option("state", "deduplicate-state")
    )
    rows = df.load(SQL).collect()
    assert len(rows) == 20
    for r in rows:
        want = last_row(r["key"]["f0"])
        value = r["value"].asDict()
        assert value["f1"] == want["f1"] and value["f9"] == want["f9"] and value["f10"] == want["f10"]
        assert value["f13"] == want["f13"] and value["f8"] == want["f8"]
        micros = (value["f11"] - _EPOCH) // _US
        assert micros == want["f11"] // 1000  # Spark holds microseconds
    kryo = (
        spark.read.format("flinkstate")
        .option("operator", "kryo-states")
        .option("state", "k_rich")
        .option("valueType", RICH_DDL)
        .load(SQL)
        .filter("key = 5")
        .collect()
    )
    assert [r["value"].asDict() for r in kryo] == [rich(5)]


_EPOCH = __import__("datetime").datetime(1970, 1, 1)
_US = __import__("datetime").timedelta(microseconds=1)
