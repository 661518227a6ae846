"""P6-P8: the Spark data source against Spark's own Parquet reader and writer."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import ceiling_source

from common import Result, paired, spark_session, timed


def _spark() -> Any:
    spark = spark_session()
    ceiling_source.register(spark)
    return spark


def _rows(spark: Any, n: int) -> Any:
    return spark.range(0, n, 1, 2).selectExpr("id as user", "id * 3 as total")


def _bootstrap(df: Any, path: str) -> None:
    (
        df.write.format("flinkstate")
        .mode("overwrite")
        .option("operator", "op")
        .option("state", "total")
        .option("stateType", "value")
        .option("keyColumns", "user")
        .save(path)
    )


def _noop(df: Any) -> None:
    df.write.format("noop").mode("overwrite").save()


Rounds = list[tuple[float, float]]


def _rates(n: int, runs: int, ours: Any, anchor: Any, ceiling: Any) -> tuple[Rounds, Rounds]:
    """Rows per second in ``runs`` rounds (after one warming up the JVM and the workers):
    (ours, anchor) and (ceiling, anchor) pairs, each round timing all three."""
    rounds, ceiling_rounds = [], []
    for i in range(runs + 1):
        ours_t, anchor_t, ceiling_t = timed(ours), timed(anchor), timed(ceiling)
        if i:
            rounds.append((n / ours_t, n / anchor_t))
            ceiling_rounds.append((n / ceiling_t, n / anchor_t))
    return rounds, ceiling_rounds


def _ceiling(bench_id: str, what: str, rounds: Rounds, anchor: str) -> Result:
    """The Python data source API's own ceiling against Spark's Parquet: no goal, it bounds
    the ratio any Python source (flinkstate included) can reach on this machine."""
    rate, anchor_rate, ratio = paired(rounds)
    metric = f"{what} (the API's ceiling)"
    return Result(
        bench_id, metric, rate, "rows/s", anchor, anchor_rate, ratio, "none (bounds the ratio)", None
    )


def p6_p8(quick: bool) -> Iterator[Result]:
    n = 1_000_000 if quick else 10_000_000
    runs = 1 if quick else 3
    spark = _spark()
    work = tempfile.mkdtemp(prefix="flinkstate-spark-")
    try:
        source = _rows(spark, n).repartition(2, "user").cache()
        source.count()
        savepoint = os.path.join(work, "sp")
        rounds, ceiling_rounds = _rates(
            n,
            runs,
            lambda: _bootstrap(source, savepoint),
            lambda: source.write.mode("overwrite").parquet(os.path.join(work, "pq")),
            lambda: source.write.format("ceiling").mode("append").save(),
        )
        yield _ceiling(
            "P7C", "write into a Python sink that drops its input", ceiling_rounds, "df.write.parquet"
        )
        ours_rate, anchor_rate, ratio = paired(rounds)
        yield Result(
            "P7",
            f"bootstrap write of {n} ValueState rows",
            ours_rate,
            "rows/s",
            "df.write.parquet of the same rows",
            anchor_rate,
            ratio,
            ">= 0.9x",
            ratio >= 0.9,
        )

        def load(**options: str) -> Any:  # once per query (Spark 4.3: docs/spark/read.md)
            reader = spark.read.format("flinkstate").option("operator", "op").options(**options)
            return reader.option("state", "total").load(savepoint)

        state = load()
        plain = os.path.join(work, "plain")
        state.write.mode("overwrite").parquet(plain)  # the same rows and columns, as plain Parquet
        parquet = spark.read.parquet(plain)
        reader = spark.read.format("ceiling").schema(state.schema).option("partitions", "8")
        ceiling_df = reader.option("rows", str(n)).load()
        rounds, ceiling_rounds = _rates(
            n, runs, lambda: _noop(state), lambda: _noop(parquet), lambda: _noop(ceiling_df)
        )
        yield _ceiling(
            "P6C", "read from a Python source yielding prebuilt batches", ceiling_rounds, "spark.read.parquet"
        )
        ours_rate, anchor_rate, ratio = paired(rounds)
        yield Result(
            "P6",
            f"read {n} ValueState rows (all columns) into the noop sink",
            ours_rate,
            "rows/s",
            "spark.read.parquet of the same rows",
            anchor_rate,
            ratio,
            ">= 0.8x",
            ratio >= 0.8,
        )

        from flinkstate.connector import PUSHDOWN_CONF

        key = n // 3
        one_row = spark.read.format("ceiling").schema("key bigint").options(partitions="1", rows="1")
        rounds: dict[str, list[tuple[float, float]]] = {"keys": [], "pushdown": [], "floor": []}
        for i in range(runs + 1):
            by_option: list[Any] = []
            pushed: list[Any] = []
            one = timed(lambda got=by_option: got.extend(load(keys=f"[{key}]").collect()))
            spark.conf.set(PUSHDOWN_CONF, "true")  # the opt-in path, one load per query
            one_pushed = timed(lambda got=pushed: got.extend(load().filter(f"key = {key}").collect()))
            spark.conf.set(PUSHDOWN_CONF, "false")
            full = timed(lambda: _noop(load()))
            floor = timed(lambda: one_row.load().collect())
            for found in (by_option, pushed):
                assert [(r.key, r.value) for r in found] == [(key, key * 3)], found
            if i:
                rounds["keys"].append((one, full))
                rounds["pushdown"].append((one_pushed, full))
                rounds["floor"].append((floor, full))
        floor_t, full_floor_t, _ = paired(rounds["floor"])
        yield Result(
            "P8C",
            "a one-row query of a Python source (the API's floor)",
            floor_t * 1e3,
            "ms",
            "full scan",
            full_floor_t * 1e3,
            full_floor_t / floor_t,
            "none (bounds the ratio)",
            None,
        )
        for variant, metric in (
            ("keys", "single key selected with the keys option (the default, safe path)"),
            ("pushdown", "single-key filter pushed down (opt-in, one load per query)"),
        ):
            one_t, full_t, _ = paired(rounds[variant])
            yield Result(
                "P8", metric, one_t * 1e3, "ms", "full scan", full_t * 1e3, full_t / one_t,
                ">= 20x faster", full_t / one_t >= 20,
            )  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()


BENCHMARKS = {"P6": p6_p8}
