"""The one rule for "the same key" through Spark (floats by bits, one NaN): a write keeps
the last row of each key, user key included; reads, the ``keys`` option and the ``process``
runner at parallelism 2 agree with a plain model keyed by the bits of the canonical float."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import pytest

from flinkstate.connector import process

import process_functions
from process_functions import WordCount, stored_counts

KEYS = [float("nan"), 1.0, float("nan"), -0.0, 0.0, -0.0, float("nan"), 2.5]


def bits(x: float) -> bytes:
    return b"\x7f\xf8" + bytes(6) if math.isnan(x) else struct.pack(">d", x)


def last_values(keys: list[float]) -> dict[bytes, int]:
    return {bits(k): i for i, k in enumerate(keys)}


@pytest.fixture(autouse=True, scope="module")
def _functions_by_value() -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(process_functions)


def _write(df: Any, path: str, mode: str, **options: str) -> None:
    writer = df.repartition(1).write.format("flinkstate").mode(mode).option("operator", "op")
    for k, v in {"keyColumns": "k", "parallelism": "2", **options}.items():
        writer = writer.option(k, v)
    writer.save(path)


def _read(spark: Any, path: str, state: str, **options: str) -> list[Any]:
    reader = spark.read.format("flinkstate").option("operator", "op").option("state", state)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(path).collect()


def test_write_read_and_select_float_keys(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "sp")
    rows = [(k, i) for i, k in enumerate(KEYS)]
    _write(spark.createDataFrame(rows, "k double, v bigint"), path, "overwrite", state="v", stateType="value")
    got = {bits(r.key): r.value for r in _read(spark, path, "v")}
    assert got == last_values(KEYS)
    picked = {bits(r.key): r.value for r in _read(spark, path, "v", keys="[NaN, -0.0]")}
    assert picked == {b: v for b, v in last_values(KEYS).items() if b in (bits(math.nan), bits(-0.0))}
    maps = spark.createDataFrame([(7.0, k, i) for i, k in enumerate(KEYS)], "k double, u double, v bigint")
    _write(maps, path, "append", state="m", stateType="map", userKeyColumn="u")
    entries = {bits(r.user_key): r.value for r in _read(spark, path, "m")}
    assert entries == last_values(KEYS)


def test_process_counts_float_keys_by_bits(spark: Any, tmp_path: Path) -> None:
    chk = tmp_path / "chk"
    emitted: list[tuple[bytes, int]] = []
    for run in (KEYS, list(reversed(KEYS))):
        df = spark.createDataFrame([(k,) for k in run], "k double")
        out = process(df, "k", WordCount(), "k double, count bigint", str(chk), "wc", parallelism=2)
        emitted += [(bits(r.k), r["count"]) for r in out.collect()]
    model: dict[bytes, int] = {}
    for k in [*KEYS, *KEYS]:
        model[bits(k)] = model.get(bits(k), 0) + 1
    assert {b: max(n for c, n in emitted if c == b) for b, _ in emitted} == model
    assert {bits(k): n for k, n in stored_counts(chk).items()} == model
