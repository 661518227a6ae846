"""Write a checkpoint with the state engine, then read it with Spark: metadata and states.

Usage: python examples/spark_read.py [URL] [--s3-endpoint http://127.0.0.1:5555]
"""

from __future__ import annotations

from flinkstate.checkpoint import CheckpointStorage

import running_count
from spark_setup import arguments, make_bucket, spark_options, spark_session, storage_options


def main() -> None:
    args = arguments(__doc__ or "", "/tmp/flinkstate-examples/read")
    make_bucket(args)
    pending = CheckpointStorage(args.url, storage_options(args)).begin()
    pending.write_keyed("clicks", running_count.run(5_000))
    checkpoint = pending.commit()
    print(f"checkpoint {checkpoint.checkpoint_id} written to {args.url}")

    spark = spark_session()
    reader = spark.read.format("flinkstate").options(**spark_options(args))
    reader.load(args.url).show(truncate=False)  # the metadata view
    count = reader.option("operator", "clicks").option("state", "count").load(args.url)
    count.orderBy("key").show()
    count.filter("key = 'user-3'").explain()  # the key filter is pushed down: one key group read
    recent = (
        spark.read.format("flinkstate")
        .options(**spark_options(args))
        .option("operator", "clicks")
        .option("state", "recent")
        .option("flatten", "false")
        .load(args.url)
    )
    recent.show(truncate=False)
    spark.stop()


if __name__ == "__main__":
    main()
