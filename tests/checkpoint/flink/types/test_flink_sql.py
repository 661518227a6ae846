"""Flink SQL RowData state (SqlJob.java): keys and values decoded from the serializer snapshots."""

from __future__ import annotations

import datetime
import decimal
import math
import random
import struct
from typing import Any

import pyarrow as pa
import pytest
from flink_model import VERSIONS, fixture
from rowdata_model import encode, flink_hash
from sql_model import IDS, SQL, accumulators, dedup_column, last_row, sql_operator, text

from flinkstate.checkpoint.flink import FlinkSavepoint, read_savepoint
from flinkstate.checkpoint.flink.errors import FlinkFormatError
from flinkstate.checkpoint.flink.types.rowdata_read import (
    RowDataReader,
    SqlTypeInfo,
    _binary_row,
    key_group_of,
)
from flinkstate.checkpoint.flink.wire.data_read import Cursor
from flinkstate.checkpoint.flink.wire.objects_read import JavaStreamReader
from flinkstate.state.errors import SerializationError
from flinkstate.state.keygroups.assignment import compute_key_group_for_key_hash

DEDUP = ("4_deduplicate", "deduplicate-state")
AGG = ("10_group-aggregate", "accState")


@pytest.fixture(scope="module", params=[(v, k) for v in VERSIONS for k in SQL], ids="-".join)
def case(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(Flink version, fixture kind): each SQL fixture of each version (the SQL operators' uids
    are the same in each)."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def savepoint(case: tuple[str, str]) -> FlinkSavepoint:
    return read_savepoint(str(fixture(*case)))


def _state(savepoint: FlinkSavepoint, case: tuple[str, str], state: tuple[str, str], **kw: Any) -> pa.Table:
    """SqlJob's SQL state ``state`` (operator uid, state name) in the fixture ``case``."""
    return savepoint.keyed_state(sql_operator(state[0], case[0]), state[1], **kw)


def _close(got: object, want: object) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want)
    return got == want


def test_metadata_names_the_sql_types(savepoint: FlinkSavepoint, case: tuple[str, str]) -> None:
    states = {s.name: s for s in savepoint.states()}
    dedup = states["deduplicate-state"]
    assert dedup.key_type == "ROW<f0 BIGINT>"
    assert dedup.value_type.startswith(
        "ROW<f0 BIGINT, f1 VARCHAR, f2 INTEGER, f3 SMALLINT, f4 TINYINT, f5 BOOLEAN"
    )
    assert "f9 DECIMAL(38, 18), " in dedup.value_type
    types = {"f10": "DECIMAL(10, 2)", "f11": "TIMESTAMP(9)", "f12": "TIMESTAMP(3)", "f13": "DATE"}
    for name, sql in types.items():
        assert f"{dedup_column(name, case[0])} {sql}," in dedup.value_type, name
    assert "f15 TIMESTAMP WITH LOCAL TIME ZONE(3)" in dedup.value_type
    assert dedup.decodable and dedup.serializer.endswith("RowDataSerializer$RowDataSerializerSnapshot")
    agg = states["accState"]
    assert agg.key_type == "ROW<f0 BIGINT, f1 VARCHAR>" and agg.ttl
    # Before 1.19 no STATE_TTL hint: the option gives every SQL state the TTL, the deduplication's too.
    assert dedup.ttl == (case[0] not in ("2.3", "1.20"))


def test_deduplication_state_every_value(savepoint: FlinkSavepoint, case: tuple[str, str]) -> None:
    version = case[0]
    table = _state(savepoint, case, DEDUP)
    value_type = table.schema.field("value").type

    def col(name: str) -> str:
        return dedup_column(name, version)

    assert value_type.field("f9").type == pa.decimal128(38, 18)
    assert value_type.field(col("f10")).type == pa.decimal128(10, 2)
    assert value_type.field(col("f11")).type == pa.timestamp("ns")
    assert value_type.field(col("f12")).type == pa.timestamp("ms")
    assert value_type.field(col("f13")).type == pa.date32()
    assert value_type.field("f15").type == pa.timestamp("ms", tz="UTC")
    values = table.column("value").combine_chunks()
    # Timestamps compared as integers in their unit (nanoseconds do not fit datetime).
    as_ints = {f: values.field(f).cast(pa.int64()).to_pylist() for f in (col("f11"), col("f12"))}
    rows = table.to_pylist()
    assert len(rows) == table.num_rows == len(IDS)
    seen = set()
    for i, row in enumerate(rows):
        k = row["key"]["f0"]
        seen.add(k)
        assert 0 <= row["key_group"] < 128 and row["namespace"] is None
        want = last_row(k, version)
        got = dict(row["value"], **{f: ints[i] for f, ints in as_ints.items()})
        for name, expected in want.items():
            assert _close(got[name], expected), (k, name, got[name], expected)
    assert seen == set(IDS)


def test_group_aggregation_keys_values_and_ttl(savepoint: FlinkSavepoint, case: tuple[str, str]) -> None:
    table = _state(savepoint, case, AGG)
    assert table.schema.field("key").type == pa.struct([("f0", pa.int64()), ("f1", pa.string())])
    rows = table.to_pylist()
    assert sorted(r["key"]["f0"] for r in rows) == list(IDS)
    for row in rows:
        k = row["key"]["f0"]
        assert row["key"]["f1"] == text(k)
        want = accumulators(k)
        assert all(_close(row["value"][f], v) for f, v in want.items()), (k, row["value"], want)
        assert row["ttl_timestamp"].timestamp() > 1.7e9


@pytest.mark.parametrize(("state", "arity"), [(DEDUP, 1), (AGG, 2)])
def test_keys_rebuilt_by_the_model_hash_to_their_key_groups(
    savepoint: FlinkSavepoint, case: tuple[str, str], state: tuple[str, str], arity: int
) -> None:
    """The decoded keys, re-encoded as BinaryRowData by the model, give Flink's key groups:
    the key bytes were read (and the model writes) exactly as Flink does."""
    fields = [SqlTypeInfo("BIGINT"), SqlTypeInfo("VARCHAR")][:arity]
    for row in _state(savepoint, case, state).to_pylist():
        values = tuple(row["key"][f"f{i}"] for i in range(arity))
        key = encode(fields, list(values))[4:]
        assert compute_key_group_for_key_hash(flink_hash(key), 128) == row["key_group"]
        assert key_group_of(tuple(fields), values, 128) == row["key_group"]


BASIC_ROOTS = [
    "BIGINT",
    "INTEGER",
    "SMALLINT",
    "TINYINT",
    "BOOLEAN",
    "FLOAT",
    "DOUBLE",
    "VARCHAR",
    "VARBINARY",
    "DATE",
]
"""The SQL types both the decoder and the model encode."""


def test_key_rows_written_as_the_model_writes_them() -> None:
    roots = BASIC_ROOTS
    rng = random.Random(5)
    for arity in (1, 3, 57, 70):
        fields = tuple(SqlTypeInfo(rng.choice(roots)) for _ in range(arity))
        for _ in range(20):
            values = tuple(_random_value(rng, t) for t in fields)
            row = _binary_row(fields, values)
            assert row == encode(list(fields), list(values))[4:]
            assert key_group_of(fields, values, 256) == compute_key_group_for_key_hash(flink_hash(row), 256)
    assert key_group_of((SqlTypeInfo("TIMESTAMP_WITHOUT_TIME_ZONE", 9),), (5,), 128) is None


def test_key_group_pushdown_reads_only_those_groups(savepoint: FlinkSavepoint, case: tuple[str, str]) -> None:
    full = _state(savepoint, case, DEDUP)
    groups = sorted(set(full.column("key_group").to_pylist()))[:3]
    part = _state(savepoint, case, DEDUP, key_groups=groups)
    assert set(part.column("key_group").to_pylist()) == set(groups)
    assert part.num_rows == sum(1 for g in full.column("key_group").to_pylist() if g in groups)


def _random_value(rng: random.Random, t: SqlTypeInfo) -> Any:
    if rng.random() < 0.15:
        return None
    root = t.root
    if root == "BIGINT":
        return rng.randint(-(2**63), 2**63 - 1)
    if root == "INTEGER":
        return rng.randint(-(2**31), 2**31 - 1)
    if root == "SMALLINT":
        return rng.randint(-(2**15), 2**15 - 1)
    if root == "TINYINT":
        return rng.randint(-128, 127)
    if root == "BOOLEAN":
        return rng.random() < 0.5
    if root in ("FLOAT", "DOUBLE"):
        v = rng.uniform(-1e30, 1e30)
        return struct.unpack("<f", struct.pack("<f", v))[0] if root == "FLOAT" else v
    if root == "VARCHAR":
        return "".join(rng.choice("ab\u00e9\u6f22\U0001f600") for _ in range(rng.randint(0, 12)))
    if root == "VARBINARY":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 12)))
    if root == "DATE":
        return datetime.date(1970, 1, 1) + datetime.timedelta(days=rng.randint(-30000, 30000))
    if root == "DECIMAL":
        digits = rng.randint(0, 10**t.precision - 1) * rng.choice((1, -1))
        return decimal.Decimal(digits).scaleb(-t.scale, decimal.Context(prec=100))
    if t.precision <= 3:
        return rng.randint(-(10**13), 10**13)
    return rng.randint(-(10**19), 10**19)


def test_binary_rows_against_the_model() -> None:
    roots = BASIC_ROOTS
    kinds = [SqlTypeInfo(r) for r in roots] + [
        SqlTypeInfo("DECIMAL", 10, 2),
        SqlTypeInfo("DECIMAL", 38, 18),
        SqlTypeInfo("DECIMAL", 19, 0),
        SqlTypeInfo("TIMESTAMP_WITHOUT_TIME_ZONE", 3),
        SqlTypeInfo("TIMESTAMP_WITHOUT_TIME_ZONE", 9),
    ]
    rng = random.Random(13)
    for arity in (1, 5, 56, 57, 130):
        fields = [rng.choice(kinds) for _ in range(arity)]
        reader = RowDataReader(tuple(fields))
        for _ in range(30):
            values = [_random_value(rng, t) for t in fields]
            got = reader.from_bytes(encode(fields, values))
            assert list(got) == values


def test_malformed_rows_and_snapshots_are_typed_errors() -> None:
    reader = RowDataReader((SqlTypeInfo("BIGINT"), SqlTypeInfo("VARCHAR")))
    with pytest.raises(SerializationError):
        reader.from_bytes(struct.pack(">i", 8) + bytes(8))
    row = encode([SqlTypeInfo("VARCHAR")], ["long enough text"])
    broken = row[:12] + struct.pack("<q", 500 << 32 | 16) + row[20:]
    with pytest.raises(SerializationError, match="beyond the row"):
        RowDataReader((SqlTypeInfo("VARCHAR"),)).from_bytes(broken)
    with pytest.raises(
        FlinkFormatError, match=r"\[FLINK_FORMAT\].*not a Java serialization stream.*byte offset 0"
    ):
        JavaStreamReader(Cursor(b"\x00\x00\x00\x00", "f"), "field 0 type").read()
    stream = bytes.fromhex("aced0005737200") + b"\x2forg.apache"
    with pytest.raises(FlinkFormatError, match=r"\[FLINK_FORMAT\].*truncated"):
        JavaStreamReader(Cursor(stream, "f"), "field 0 type").read()


def test_unsupported_sql_field_types_leave_raw_bytes_named() -> None:
    from flinkstate.checkpoint.flink.errors import UnsupportedSerializerError
    from flinkstate.checkpoint.flink.types.rowdata_read import _logical

    with pytest.raises(UnsupportedSerializerError, match=r"\[UNSUPPORTED_SERIALIZER\].*SQL type ARRAY"):
        _logical({"@class": "org.apache.flink.table.types.logical.ArrayType", "typeRoot": "ARRAY"}, "f3")
    decimal_type = {"typeRoot": "DECIMAL", "precision": 20, "scale": 4}
    assert _logical(decimal_type, "f0") == SqlTypeInfo("DECIMAL", 20, 4)
