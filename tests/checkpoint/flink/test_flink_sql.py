"""Flink SQL RowData state (SqlJob.java): keys and values decoded from the serializer snapshots."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from sql_model import IDS, SQL, SQL_DIR, accumulators, last_row, text

from flinkstate.checkpoint.flink import FlinkSavepoint, read_savepoint

DEDUP = ("4_deduplicate", "deduplicate-state")
AGG = ("10_group-aggregate", "accState")


@pytest.fixture(scope="module", params=SQL)
def savepoint(request: pytest.FixtureRequest) -> FlinkSavepoint:
    return read_savepoint(str(SQL_DIR / request.param))


def _close(got: object, want: object) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want)
    return got == want


def test_metadata_names_the_sql_types(savepoint: FlinkSavepoint) -> None:
    states = {s.name: s for s in savepoint.states()}
    dedup = states["deduplicate-state"]
    assert dedup.key_type == "ROW<f0 BIGINT>"
    assert dedup.value_type.startswith(
        "ROW<f0 BIGINT, f1 VARCHAR, f2 INTEGER, f3 SMALLINT, f4 TINYINT, f5 BOOLEAN"
    )
    assert (
        "f9 DECIMAL(38, 18), f10 DECIMAL(10, 2), f11 TIMESTAMP(9), f12 TIMESTAMP(3), f13 DATE"
        in dedup.value_type
    )
    assert "f15 TIMESTAMP WITH LOCAL TIME ZONE(3)" in dedup.value_type
    assert dedup.decodable and dedup.serializer.endswith("RowDataSerializer$RowDataSerializerSnapshot")
    agg = states["accState"]
    assert agg.key_type == "ROW<f0 BIGINT, f1 VARCHAR>" and agg.ttl


def test_deduplication_state_every_value(savepoint: FlinkSavepoint) -> None:
    table = savepoint.keyed_state(*DEDUP)
    value_type = table.schema.field("value").type
    assert value_type.field("f9").type == pa.decimal128(38, 18)
    assert value_type.field("f10").type == pa.decimal128(10, 2)
    assert value_type.field("f11").type == pa.timestamp("ns")
    assert value_type.field("f12").type == pa.timestamp("ms")
    assert value_type.field("f13").type == pa.date32()
    assert value_type.field("f15").type == pa.timestamp("ms", tz="UTC")
    values = table.column("value").combine_chunks()
    # Timestamps compared as integers in their unit (nanoseconds do not fit datetime).
    as_ints = {f: values.field(f).cast(pa.int64()).to_pylist() for f in ("f11", "f12")}
    rows = table.to_pylist()
    assert len(rows) == table.num_rows == len(IDS)
    seen = set()
    for i, row in enumerate(rows):
        k = row["key"]["f0"]
        seen.add(k)
        assert 0 <= row["key_group"] < 128 and row["namespace"] is None
        want = last_row(k)
        got = dict(row["value"], f11=as_ints["f11"][i], f12=as_ints["f12"][i])
        for name, expected in want.items():
            assert _close(got[name], expected), (k, name, got[name], expected)
    assert seen == set(IDS)


def test_group_aggregation_keys_values_and_ttl(savepoint: FlinkSavepoint) -> None:
    table = savepoint.keyed_state(*AGG)
    assert table.schema.field("key").type == pa.struct([("f0", pa.int64()), ("f1", pa.string())])
    rows = table.to_pylist()
    assert sorted(r["key"]["f0"] for r in rows) == list(IDS)
    for row in rows:
        k = row["key"]["f0"]
        assert row["key"]["f1"] == text(k)
        want = accumulators(k)
        assert all(_close(row["value"][f], v) for f, v in want.items()), (k, row["value"], want)
        assert row["ttl_timestamp"].timestamp() > 1.7e9


def test_key_group_pushdown_reads_only_those_groups(savepoint: FlinkSavepoint) -> None:
    full = savepoint.keyed_state(*DEDUP)
    groups = sorted(set(full.column("key_group").to_pylist()))[:3]
    part = savepoint.keyed_state(*DEDUP, key_groups=groups)
    assert set(part.column("key_group").to_pylist()) == set(groups)
    assert part.num_rows == sum(1 for g in full.column("key_group").to_pylist() if g in groups)
