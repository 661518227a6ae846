"""``rocksdb_options=`` of the Spark runners: checked on the driver before any task runs,
and the RocksDB backends the executors build are opened with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.connector import ProcessError, coprocess, foreach_batch, process
from flinkstate.state import KeyedCoProcessFunction

import process_functions
from process_functions import WordCount, WriteBufferSeen

WC_SCHEMA = "word string, count bigint"


@pytest.fixture(autouse=True, scope="module")
def _functions_by_value() -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(process_functions)


class _Co(KeyedCoProcessFunction):
    def process_element1(self, value: Any, ctx: Any) -> Any:
        yield value

    def process_element2(self, value: Any, ctx: Any) -> Any:
        yield value


@pytest.mark.parametrize(
    ("backend", "options", "named"),
    [
        ("rocksdb", {"block_cache": 1}, "unknown RocksDB option 'block_cache'"),
        ("rocksdb", {"write_buffer_bytes": "4 MiB"}, "write_buffer_bytes must be a positive int"),
        ("heap", {"write_buffer_bytes": 1 << 22}, "rocksdb_options are for backend='rocksdb'"),
    ],
)
def test_bad_rocksdb_options_fail_before_any_task(
    spark: Any, tmp_path: Path, backend: str, options: dict[str, Any], named: str
) -> None:
    df = spark.createDataFrame([("a",)], "word string")
    chk = str(tmp_path / "c")
    match = r"^\[INVALID_OPTION\] .*" + named
    given = {"backend": backend, "rocksdb_options": options}
    with pytest.raises(ProcessError, match=match):
        process(df, "word", WordCount(), WC_SCHEMA, chk, "wc", **given)
    with pytest.raises(ProcessError, match=match):  # when the query's function is made
        foreach_batch("word", WordCount(), WC_SCHEMA, chk, "wc", **given)
    with pytest.raises(ProcessError, match=match):
        coprocess(df, df, "word", "word", _Co(), "word string", chk, "co", **given)
    assert not (tmp_path / "c").exists()


def test_the_executors_open_rocksdb_with_the_options(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([(w,) for w in "abcab"], "word string")
    chosen = {"write_buffer_bytes": str(4 << 20), "block_cache_bytes": 32 << 20}
    out = process(df, "word", WriteBufferSeen(), WC_SCHEMA, str(tmp_path / "p"), "wb",
                  backend="rocksdb", rocksdb_options=chosen, parallelism=2)  # fmt: skip
    assert sorted(map(tuple, out.collect())) == sorted((w, 4 << 20) for w in "abcab")
    seen: list[Any] = []
    run_batch = foreach_batch("word", WriteBufferSeen(), WC_SCHEMA, str(tmp_path / "s"), "wb",
                              sink=lambda output, _: seen.extend(output.collect()),
                              backend="rocksdb", rocksdb_options={"write_buffer_bytes": 6 << 20})  # fmt: skip
    run_batch(df, 0)
    assert sorted(map(tuple, seen)) == sorted((w, 6 << 20) for w in "abcab")
    assert CheckpointStorage(str(tmp_path / "s")).completed_ids() == [1]
