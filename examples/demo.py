"""`make demo`: the main job end to end on local defaults.

1. A keyed running count over a generated stream, on the heap backend.
2. A checkpoint of that state in a local directory.
3. The checkpoint read back with Spark: the metadata view and one state as a table.
"""

from __future__ import annotations

import os
import tempfile

from flinkstate.checkpoint import CheckpointStorage

import running_count


def main() -> None:
    print("== 1. keyed running count on the heap backend ==")
    backend = running_count.run(20_000)
    running_count.show(backend)

    root = os.path.join(tempfile.mkdtemp(prefix="flinkstate-demo-"), "checkpoints")
    print(f"\n== 2. checkpoint to {root} ==")
    pending = CheckpointStorage(root).begin()
    pending.write_keyed("clicks", backend)
    completed = pending.commit()
    for ref in completed.manifest.files():
        print(f"  chk-{completed.checkpoint_id}/{ref.path}: {ref.rows} rows, {ref.size} bytes")

    print("\n== 3. read back with spark.read.format('flinkstate') ==")
    from spark_setup import spark_session

    spark = spark_session()  # SPARK_REMOTE=local[2] runs it over Spark Connect
    spark.read.format("flinkstate").load(root).show(truncate=False)
    pages = spark.read.format("flinkstate").option("operator", "clicks").option("state", "pages").load(root)
    pages.orderBy("key", "user_key").show(12)
    pages.groupBy("user_key").sum("value").orderBy("user_key").show()
    spark.stop()


if __name__ == "__main__":
    main()
