"""Routing: the native key-group expression against the backends' key-group function (the
model) on random and extreme keys of every integral type and booleans; null keys fail."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from flinkstate.connector import ProcessError, process
from flinkstate.connector.routing import (
    _SEED_ZERO,
    key_type_of,
    route_values,
    spark_hash_int,
    with_key_group,
    with_route,
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
    df = spark.createDataFrame(
        [(v, 0) for v in values], f"`{name.replace('`', '``')}` {sql_type}, __flinkstate_h3 int"
    )
    key_type = key_type_of(list(to_arrow_schema(df.schema).types)[:1], [name])
    for max_p, p in ((128, 3), (32768, 7), (1, 1)):
        grouped = with_key_group(df, name, key_type, max_p, "kg")
        assert grouped is not None
        routed = with_route(grouped, [name], key_type, p, max_p, "route")
        assert routed.columns == [name, "__flinkstate_h3", "kg", "route"]
        routes = route_values(p)
        for k, h3, kg, route in routed.collect():
            expected = assign_to_key_group(k, max_p, key_type)
            assert (k, h3, kg) == (k, 0, expected)
            assert route == routes[expected * p // max_p]


def test_seed_zero_hashes_to_zero() -> None:
    """Spark's ``hash(_SEED_ZERO, c)`` is Murmur3 of ``c`` at seed 0 (Flink's murmurHash)."""
    assert spark_hash_int(_SEED_ZERO) == 0


def test_other_key_types_use_the_udf(spark: Any) -> None:
    from flinkstate.state import Types

    df = spark.createDataFrame([("a",)], "k string")
    assert with_key_group(df, "k", Types.STRING(), 128, "kg") is None


def test_a_null_key_fails_the_run(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([(1,), (None,), (2,)], "word bigint")
    with pytest.raises(ProcessError, match="INVALID_KEY"):
        process(df, "word", WordCount(), "word bigint, count bigint", str(tmp_path), "wc", parallelism=2)
    quoted = spark.createDataFrame([(None,)], "`it's` int")
    with pytest.raises(Exception, match=r"\[INVALID_KEY\] key column \"it's\" holds null"):
        with_route(
            quoted, ["it's"], key_type_of([__import__("pyarrow").int32()], ["it's"]), 2, 128, "r"
        ).collect()
