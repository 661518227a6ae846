"""The streaming sink: micro-batches of JSON files upserted into keyed state, a delete,
and a restart that continues where the query stopped.

Usage: python examples/spark_stream.py [URL] [--s3-endpoint http://127.0.0.1:5555]
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from spark_setup import arguments, make_bucket, spark_options, spark_session


def main() -> None:
    args = arguments(__doc__ or "", "/tmp/flinkstate-examples/stream")
    make_bucket(args)
    work = Path(tempfile.mkdtemp(prefix="flinkstate-stream-"))
    spark = spark_session()

    def batch(name: str, rows: list[dict[str, object]]) -> None:
        (work / "in").mkdir(exist_ok=True)
        (work / "in" / name).write_text("".join(json.dumps(r) + "\n" for r in rows))

    def run() -> None:
        query = (
            spark.readStream.schema("sensor string, reading double, op string")
            .json(str(work / "in"))
            .writeStream.format("flinkstate")
            .options(**spark_options(args))
            .option("checkpointLocation", str(work / "spark-checkpoint"))
            .option("operator", "sensors")
            .option("state", "last")
            .option("stateType", "value")
            .option("keyColumns", "sensor")
            .option("valueColumns", "reading")
            .option("opColumn", "op")
            .trigger(availableNow=True)
            .start(args.url)
        )
        query.awaitTermination()

    def show() -> None:
        last = spark.read.format("flinkstate").options(**spark_options(args)).option("operator", "sensors")
        last.option("state", "last").load(args.url).orderBy("key").show()

    batch("1.json", [{"sensor": f"s{i}", "reading": i * 1.5, "op": "upsert"} for i in range(5)])
    run()
    show()
    batch(
        "2.json",
        [{"sensor": "s1", "reading": 99.0, "op": "upsert"}, {"sensor": "s4", "reading": 0, "op": "delete"}],
    )
    run()  # a restarted query continues from its last committed batch
    show()
    spark.stop()


if __name__ == "__main__":
    main()
