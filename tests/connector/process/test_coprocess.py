"""Two keyed inputs on Spark (``coprocess``): results against a plain-Python run of the same
function over the merged, ordered input, restarts and rescaling, multi-column keys named
differently per input, nulls and unicode, failures that commit nothing, bad arguments."""

from __future__ import annotations

import random
from collections import namedtuple
from pathlib import Path
from typing import Any

import coprocess_functions
import pytest
from coprocess_functions import OUT_SCHEMA, FailingOrders, OrderPayments, harness_run

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.connector import ProcessError, coprocess, process
from flinkstate.state import ProcessFunctionError

Order = namedtuple("Order", "id amount ts")
Payment = namedtuple("Payment", "id paid ts")
KEYS = ["a", "ß", "日本", "", "x y", "😀", "k7"]


@pytest.fixture(autouse=True, scope="module")
def _functions_by_value() -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(coprocess_functions)


def _run_input(rnd: random.Random, start: int) -> tuple[list[Order], list[Payment]]:
    orders = [Order(rnd.choice(KEYS), rnd.choice([5, 10, 30]), start + rnd.randrange(400)) for _ in range(60)]
    payments = [
        Payment(
            rnd.choice(KEYS), rnd.choice([None, 0, 5, 10, 25]), rnd.choice([None, start + rnd.randrange(400)])
        )
        for _ in range(90)
    ]
    return orders, payments


def merged(orders: list[Any], payments: list[Any], event_time: bool) -> list[tuple[int, Any, int | None]]:
    """The documented order: by event time (null first), input 1 before 2, then input order."""
    elements = [(1, i, o) for i, o in enumerate(orders)] + [(2, i, p) for i, p in enumerate(payments)]
    if event_time:
        elements.sort(key=lambda e: (e[2].ts is not None, e[2].ts or 0, e[0], e[1]))
    return [(side, row, row.ts if event_time else None) for side, _, row in elements]


@pytest.mark.connect
def test_orders_and_payments_restart_and_rescale(spark: Any, tmp_path: Path) -> None:
    rnd = random.Random(3)
    chk = str(tmp_path / "chk")
    runs = [_run_input(rnd, 1_000 * i) for i in range(3)]
    got = []
    for (orders, payments), parallelism in zip(runs, [3, None, 2], strict=True):
        o = spark.createDataFrame(orders, "id string, amount bigint, ts bigint")
        p = spark.createDataFrame(payments, "id string, paid bigint, ts bigint")
        out = coprocess(o, p, "id", "id", OrderPayments(), OUT_SCHEMA, chk, "op",
                        parallelism=parallelism, event_time="ts", watermark_delay=5)  # fmt: skip
        got.append(sorted(map(tuple, out.collect()), key=repr))
    model = harness_run([merged(o, p, True) for o, p in runs], 5, False)
    assert got == [sorted(m, key=repr) for m in model]
    assert any(r[1] == "unpaid" for r in got[0]) and any(r[1] == "paid" for r in got[0])
    assert open_checkpoint(chk).operator("op").parallelism == 2
    seen = spark.read.format("flinkstate").option("operator", "op").option("state", "seen").load(chk)
    counts: dict[str, int] = {}
    for orders, payments in runs:
        for row in [*orders, *payments]:
            counts[row.id] = counts.get(row.id, 0) + 1
    assert {r.key: r.value for r in seen.collect()} == counts  # one state for both inputs
    assert CheckpointStorage(chk).completed_ids() == [1, 2, 3]


def test_multi_column_keys_named_apart_without_event_time(spark: Any, tmp_path: Path) -> None:
    rnd = random.Random(5)
    Order2 = namedtuple("Order2", "shop customer amount")
    Payment2 = namedtuple("Payment2", "store cust paid note")
    orders = [Order2(rnd.choice("çab"), rnd.randrange(3), rnd.choice([5, 10])) for _ in range(80)]
    payments = [Payment2(rnd.choice("çab"), rnd.randrange(3), rnd.choice([None, 5]), rnd.choice([None, "ü"]))
                for _ in range(80)]  # fmt: skip
    o = spark.createDataFrame(orders, "shop string, customer int, amount bigint")
    p = spark.createDataFrame(payments, "store string, cust int, paid bigint, note string")
    out = coprocess(o, p, ["shop", "customer"], ["store", "cust"], OrderPayments(), OUT_SCHEMA,
                    str(tmp_path / "c"), "op", parallelism=2, end_of_input=True)  # fmt: skip
    elements = [(1, r, None) for r in orders] + [(2, r, None) for r in payments]  # input 1, then input 2
    keys = (lambda r: (r.shop, r.customer), lambda r: (r.store, r.cust))
    (model,) = harness_run([elements], 0, True, keys)
    assert sorted(map(tuple, out.collect()), key=repr) == sorted(model, key=repr)
    assert any(r[1] == "paid" for r in model)


def test_at_equal_event_times_input_1_comes_first(spark: Any, tmp_path: Path) -> None:
    o = spark.createDataFrame([("t", 10, 5), ("e", 10, 5)], "id string, amount bigint, ts bigint")
    p = spark.createDataFrame(
        [("t", 10, 5), ("t", 10, 5), ("e", 7, 4), ("e", 3, 6)], "id string, paid bigint, ts bigint"
    )
    out = coprocess(o, p, "id", "id", OrderPayments(), OUT_SCHEMA, str(tmp_path / "c"), "op", event_time="ts")
    # t: the order, then a payment covers it (the second finds no order); e: by event time
    assert sorted(map(tuple, out.collect())) == [("e", "paid", 10, 10, 3, 6), ("t", "paid", 10, 10, 2, 5)]


@pytest.mark.connect
def test_a_failing_run_commits_nothing_and_a_null_key_fails(spark: Any, tmp_path: Path) -> None:
    chk = str(tmp_path / "c")
    o = spark.createDataFrame([("a", 10, 1)], "id string, amount bigint, ts bigint")
    p = spark.createDataFrame([("a", 10, 2)], "id string, paid bigint, ts bigint")
    first = coprocess(o, p, "id", "id", FailingOrders(), OUT_SCHEMA, chk, "op", parallelism=2)
    assert [tuple(r) for r in first.collect()] == [("a", "paid", 10, 10, 2, None)]
    bad = spark.createDataFrame([("boom", 5, 3)], "id string, amount bigint, ts bigint")
    with pytest.raises(
        ProcessFunctionError, match=r"process_element1 failed for key 'boom' on subtask \d of 2.*not an order"
    ):
        coprocess(bad, p, "id", "id", FailingOrders(), OUT_SCHEMA, chk, "op", event_time="ts")
    nulls = spark.createDataFrame([(None, 5, 4)], "id string, paid bigint, ts bigint")
    with pytest.raises(ProcessError, match="INVALID_KEY"):
        coprocess(o, nulls, "id", "id", FailingOrders(), OUT_SCHEMA, chk, "op")
    assert CheckpointStorage(chk).completed_ids() == [1]
    again = coprocess(o, p, "id", "id", FailingOrders(), OUT_SCHEMA, chk, "op")  # the failed runs' id
    assert [tuple(r) for r in again.collect()] == [("a", "paid", 10, 10, 4, None)]
    assert CheckpointStorage(chk).completed_ids() == [1, 2]


@pytest.mark.connect
def test_bad_arguments_fail_before_any_task(spark: Any, tmp_path: Path) -> None:
    chk = str(tmp_path / "c")
    o = spark.createDataFrame([("a", 1, 10, 1)], "id string, n int, amount bigint, ts bigint")
    p = spark.createDataFrame([("a", 1, 10, 2)], "id string, n bigint, paid bigint, ts bigint")
    with pytest.raises(ProcessError, match=r"\[INCOMPATIBLE_KEYS\].*\['n'\] of the first input are INT"):
        coprocess(o, p, "n", "n", OrderPayments(), OUT_SCHEMA, chk, "op")
    with pytest.raises(ProcessError, match="INCOMPATIBLE_KEYS"):
        coprocess(o, p, ["id", "n"], "id", OrderPayments(), OUT_SCHEMA, chk, "op")
    with pytest.raises(ProcessError, match="INCOMPATIBLE_KEYS"):
        coprocess(o, p, ["id", "n"], ["id", "n"], OrderPayments(), OUT_SCHEMA, chk, "op")
    with pytest.raises(ProcessError, match="UNKNOWN_COLUMN"):
        coprocess(o, p, "id", "nope", OrderPayments(), OUT_SCHEMA, chk, "op")
    with pytest.raises(ProcessError, match="UNKNOWN_COLUMN"):
        coprocess(o, p, "id", "id", OrderPayments(), OUT_SCHEMA, chk, "op", event_time=("ts", "nope"))
    with pytest.raises(ProcessError, match="unknown option"):
        coprocess(o, p, "id", "id", OrderPayments(), OUT_SCHEMA, chk, "op", broadcast=o)
    with pytest.raises(ProcessError, match=r"INVALID_FUNCTION.*run it with coprocess"):
        process(o, "id", OrderPayments(), OUT_SCHEMA, chk, "op")
    from process_functions import WordCount

    with pytest.raises(ProcessError, match=r"INVALID_FUNCTION.*KeyedCoProcessFunction"):
        coprocess(o, p, "id", "id", WordCount(), OUT_SCHEMA, chk, "op")
    assert not (tmp_path / "c").exists()
