"""Routing: the native key-group expression against the backends' key-group function (the
model) on random and extreme keys of every integral type and booleans; null keys fail."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from flinkstate.connector import ProcessError, process
from flinkstate.connector.routing import key_type_of, route_values, with_key_group, with_route
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
    df = spark.createDataFrame([(v,) for v in values], f"k {sql_type}")
    key_type = key_type_of(list(to_arrow_schema(df.schema).types), ["k"])
    for max_p, p in ((128, 3), (32768, 7), (1, 1)):
        grouped = with_key_group(df, "k", key_type, max_p, "kg")
        assert grouped is not None
        routed = with_route(grouped, ["k"], key_type, p, max_p, "route").collect()
        routes = route_values(p)
        for k, kg, route in routed:
            expected = assign_to_key_group(k, max_p, key_type)
            assert (k, kg) == (k, expected)
            assert route == routes[expected * p // max_p]


def test_other_key_types_use_the_udf(spark: Any) -> None:
    from flinkstate.state import Types

    df = spark.createDataFrame([("a",)], "k string")
    assert with_key_group(df, "k", Types.STRING(), 128, "kg") is None


def test_a_null_key_fails_the_run(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([(1,), (None,), (2,)], "word bigint")
    with pytest.raises(ProcessError, match="INVALID_KEY"):
        process(df, "word", WordCount(), "word bigint, count bigint", str(tmp_path), "wc", parallelism=2)
