"""Routing: the native key-group expression against the backends' key-group function (the
model) on random and extreme keys of every integral type and booleans; null keys fail."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flinkstate.connector import ProcessError, process
from flinkstate.connector.process.routing import (
    _SEED_ZERO,
    key_group_column,
    key_type_of,
    route_column,
    route_values,
    spark_hash_int,
)
from flinkstate.state import assign_to_key_group

from process_functions import WordCount

BOUNDS = {"tinyint": 7, "smallint": 15, "int": 31, "bigint": 63}


def _values(rnd: random.Random, bits: int) -> list[int]:
    lo, hi = -(1 << bits), (1 << bits) - 1
    edges = [lo, lo + 1, -1, 0, 1, hi - 1, hi, 1 << (bits // 2), -(1 << (bits // 2))]
    return edges + [rnd.randint(lo, hi) for _ in range(400)]


@pytest.mark.parametrize("sql_type", [*BOUNDS, "boolean"])
def test_native_key_groups_equal_flinks(spark: Any, sql_type: str) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    rnd = random.Random(sql_type)
    values: list[Any] = [True, False] if sql_type == "boolean" else _values(rnd, BOUNDS[sql_type])
    name = "k`ey 'ß'"  # quoted as a SQL identifier
    df = spark.createDataFrame([(v,) for v in values], f"`{name.replace('`', '``')}` {sql_type}")
    key_type = key_type_of(list(to_arrow_schema(df.schema).types), [name])
    for max_p, p in ((128, 3), (32768, 7), (1, 1)):
        group = key_group_column(name, key_type, max_p)
        assert group is not None
        routed = df.select("*", group.alias("kg"), route_column([name], key_type, p, max_p).alias("route"))
        routes = route_values(p)
        for k, kg, route in routed.collect():
            expected = assign_to_key_group(k, max_p, key_type)
            assert (k, kg) == (k, expected)
            assert route == routes[expected * p // max_p]


def test_seed_zero_hashes_to_zero() -> None:
    """Spark's ``hash(_SEED_ZERO, c)`` is Murmur3 of ``c`` at seed 0 (Flink's murmurHash)."""
    assert spark_hash_int(_SEED_ZERO) == 0


def test_other_key_types_use_the_udf(spark: Any) -> None:
    from flinkstate.state import Types

    words = ["a", "ü", "", "日本", *(f"w{i}" for i in range(50))]
    df = spark.createDataFrame([(w,) for w in words], "k string")
    assert key_group_column("k", Types.STRING(), 128) is None
    routes = route_values(3)
    routed = df.select("k", route_column(["k"], Types.STRING(), 3, 128).alias("route")).collect()
    assert {k: r for k, r in routed} == {w: routes[assign_to_key_group(w, 128) * 3 // 128] for w in words}


def test_a_null_key_fails_the_run(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([(1,), (None,), (2,)], "word bigint")
    with pytest.raises(ProcessError, match="INVALID_KEY"):
        process(df, "word", WordCount(), "word bigint, count bigint", str(tmp_path), "wc", parallelism=2)
    quoted = spark.createDataFrame([(None,)], "`it's` int")
    with pytest.raises(Exception, match=r"\[INVALID_KEY\] key column \"it's\" holds null"):
        quoted.select(route_column(["it's"], key_type_of([pa.int32()], ["it's"]), 2, 128)).collect()
