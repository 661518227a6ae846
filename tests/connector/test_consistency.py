"""No sequence of queries on one loaded DataFrame differs from the same queries on fresh loads.

Runs with the default registration (``register(spark)``: Python filter pushdown off) and with
the ``keys`` / ``keyGroups`` options, which select as part of the relation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from checkpoint_data import write_values

from flinkstate.state import Types, assign_to_key_group

KEYS = [f"u{i}" for i in range(1000)]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("consistency") / "chk"
    return write_values(str(path), Types.STRING(), {key: n for n, key in enumerate(KEYS)}, 2)


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


QUERIES: list[tuple[str, Callable[[Any], Any]]] = [
    ("filter key", lambda df: _rows(df.filter("key = 'u7'"))),
    ("count", lambda df: df.count()),
    ("filter key in", lambda df: _rows(df.filter("key in ('u1', 'u500', 'nope')"))),
    ("all rows", lambda df: _rows(df)),
    ("filter key_group", lambda df: df.filter("key_group < 10").count()),
    ("self-join", lambda df: df.alias("a").join(df.filter("key = 'u7'").alias("b"), "key").count()),
    ("join the other way", lambda df: df.filter("key_group = 3").join(df, "key").count()),
    ("filter value", lambda df: _rows(df.filter("value > 990").select("key"))),
    ("cached", lambda df: (df.cache().filter("key = 'u9'").count(), df.count(), df.unpersist().count())),
    ("group by", lambda df: _rows(df.groupBy("key_group").count())),
    ("count again", lambda df: df.count()),
]


@pytest.mark.parametrize(
    "options",
    [{}, {"keys": '["u7", "u9", "u500", "u1"]'}, {"keyGroups": "0-40"}],
    ids=["no-selection", "keys", "keyGroups"],
)
def test_one_loaded_dataframe_answers_like_fresh_loads(
    spark: Any, root: str, options: dict[str, str]
) -> None:
    def load() -> Any:
        reader = spark.read.format("flinkstate").option("operator", "op").option("state", "count")
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load(root)

    one = load()
    reused = [(name, query(one)) for name, query in QUERIES]
    fresh = [(name, query(load())) for name, query in QUERIES]
    assert reused == fresh
    if not options:
        assert dict(fresh)["count"] == len(KEYS)
        assert dict(fresh)["filter key"] == [(assign_to_key_group("u7", 128), "u7", None, 7)]
