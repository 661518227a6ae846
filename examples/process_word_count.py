"""A keyed process function on Spark: a running word count, run twice over a DataFrame
(the second run continues from the checkpoint the first committed, at another
parallelism), then as a stream of files with ``foreach_batch`` across a restart; the state reads back
as a DataFrame.

Usage: python examples/process_word_count.py [CHECKPOINT_DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from flinkstate.connector import foreach_batch, process
from flinkstate.state import KeyedProcessFunction, RuntimeContext, Types, ValueStateDescriptor

from spark_setup import spark_session


class WordCount(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield value.word, n


def main(root: str = "/tmp/flinkstate-examples/word-count", spark: Any = None) -> dict[str, Any]:
    """Runs the example under ``root`` on ``spark`` (default: a local session, stopped at the
    end); returns the batch state's counts and what the stream's sink got."""
    own = spark is None
    spark = spark or spark_session()
    text = "to be or not to be that is the question"
    df = spark.createDataFrame([(w,) for w in text.split()], "word string")
    for parallelism in (2, 3):
        out = process(
            df,
            "word",
            WordCount(),
            "word string, count bigint",
            f"{root}/batch",
            "counts",
            parallelism=parallelism,
        )
        out.orderBy("word", "count").show()
    counts = spark.read.format("flinkstate").option("operator", "counts").option("state", "count")
    counts.load(f"{root}/batch").orderBy("key").show()
    state = {r.key: r.value for r in counts.load(f"{root}/batch").collect()}
    delivered: list[tuple[int, list[Any]]] = []

    def show(out: Any, batch_id: int) -> None:
        delivered.append((batch_id, sorted(map(tuple, out.collect()))))
        print(*delivered[-1])

    inbox = f"{root}/inbox"
    sink = foreach_batch(
        "word",
        WordCount(),
        "word string, count bigint",
        f"{root}/stream",
        "counts",
        sink=show,
    )
    for batch in [text, "to do is to be"]:  # a restart between the two batches
        spark.createDataFrame([(w,) for w in batch.split()], "word string").write.mode("append").json(inbox)
        stream = spark.readStream.schema("word string").option("maxFilesPerTrigger", 1).json(inbox)
        query = stream.writeStream.foreachBatch(sink).option("checkpointLocation", f"{root}/spark")
        query.trigger(availableNow=True).start().awaitTermination()
    if own:
        spark.stop()
    return {"batch": state, "stream": delivered}


if __name__ == "__main__":
    main(*sys.argv[1:2])
