"""Bootstrap state from DataFrames (as Flink's State Processor API does), then restore it
in the state engine at another parallelism.

Usage: python examples/spark_bootstrap.py [URL] [--s3-endpoint http://127.0.0.1:5555]
"""

from __future__ import annotations

from flinkstate.checkpoint import open_checkpoint
from flinkstate.state import ListStateDescriptor, Types, ValueStateDescriptor

from spark_setup import arguments, make_bucket, spark_options, spark_session, storage_options


def main() -> None:
    args = arguments(__doc__ or "", "/tmp/flinkstate-examples/bootstrap")
    make_bucket(args)
    spark = spark_session()
    orders = spark.range(0, 10_000).selectExpr(
        "id % 100 as customer", "id as order_id", "id * 7 % 1000 as amount"
    )
    common = {
        "operator": "orders",
        "keyColumns": "customer",
        "maxParallelism": "128",
        "parallelism": "4",
        **spark_options(args),
    }
    totals = orders.groupBy("customer").sum("amount").withColumnRenamed("sum(amount)", "total")
    totals.write.format("flinkstate").mode("overwrite").options(
        **common, state="total", stateType="value"
    ).save(args.url)
    orders.select("customer", "order_id").write.format("flinkstate").mode("append").options(
        **common, state="orders", stateType="list"
    ).save(args.url)
    spark.read.format("flinkstate").options(**spark_options(args)).load(args.url).show(truncate=False)
    spark.stop()

    checkpoint = open_checkpoint(args.url, storage_options(args))
    for subtask in range(2):  # written at parallelism 4, restored at 2
        backend = checkpoint.keyed_backend("orders", subtask, 2)
        total = backend.get_state(ValueStateDescriptor("total", Types.LONG()))
        ids = backend.get_list_state(ListStateDescriptor("orders", Types.LONG()))
        keys = sorted(backend.get_keys("total"))
        backend.set_current_key(keys[0])
        print(
            f"subtask {subtask}/2 owns {len(keys)} customers; customer {keys[0]}: "
            f"total {total.value()}, {len(list(ids.get()))} orders"
        )


if __name__ == "__main__":
    main()
