"""A local checkpoint root on a real multi-executor Spark (``local-cluster``: separate executor
JVMs) is refused for writes, ``[LOCAL_ROOT_NOT_SHARED]``, before anything is written: by
``process`` and ``foreach_batch`` on the driver before any task, by ``df.write`` and
``writeStream`` in their tasks; declared shared, each runs. Reads are not refused. Runs in a
subprocess (one SparkContext per process)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support.spark import LOCAL_CLUSTER, run_driver

SCRIPT = textwrap.dedent(
    """
    import json
    from pyspark import cloudpickle
    import process_functions
    from process_functions import WordCount, word_count_model
    from flinkstate.connector import RootNotSharedError, foreach_batch, process
    cloudpickle.register_pickle_by_value(process_functions)
    base = sys.argv[1]
    words = [f"w{i % 7}" for i in range(700)]
    df = spark.createDataFrame([(w, i) for i, w in enumerate(words)], "word string, n bigint").repartition(3)
    schema = "word string, count bigint"

    def refused(run, declare):
        try:
            run()
        except Exception as exc:  # process: ours; a write: Spark's, carrying the task's error
            text = str(exc)
            assert "[LOCAL_ROOT_NOT_SHARED]" in text and declare in text, text[-3000:]
            return type(exc).__name__
        raise AssertionError("not refused")

    def files(path):
        return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs)

    for root in (base + "/p", "file://" + base + "/q"):
        kind = refused(lambda: process(df, "word", WordCount(), schema, root, "wc"), "shared_filesystem=True")
        assert kind == "RootNotSharedError", kind
    run = foreach_batch("word", WordCount(), schema, base + "/f", "wc")
    assert refused(lambda: run(df, 0), "shared_filesystem=True") == "RootNotSharedError"
    assert not files(base + "/p") and not files(base + "/q") and not files(base + "/f")
    out = process(df, "word", WordCount(), schema, base + "/p", "wc", shared_filesystem=True)
    finals = {}
    for r in out.collect():
        finals[r.word] = max(finals.get(r.word, 0), r["count"])
    assert finals == word_count_model(words), finals
    foreach_batch("word", WordCount(), schema, base + "/f", "wc", shared_filesystem=True)(df, 0)

    def write(path, **options):
        w = (df.write.format("flinkstate").mode("overwrite").option("operator", "op").option("state", "n")
             .option("stateType", "list").option("keyColumns", "word").option("valueColumns", "n")
             .option("parallelism", "2"))
        for k, v in options.items():
            w = w.option(k, v)
        w.save(path)

    refused(lambda: write(base + "/w"), "sharedFilesystem=true")
    assert not [f for f in files(base + "/w") if f.endswith(".parquet")], files(base + "/w")
    write(base + "/w", sharedFilesystem="true")
    read = spark.read.format("flinkstate").option("operator", "op").option("state", "n").load(base + "/w")
    assert read.count() == 700  # reads are never refused

    os.makedirs(base + "/in")
    with open(base + "/in/a.json", "w") as f:
        f.writelines(json.dumps({"word": w, "n": i}) + "\\n" for i, w in enumerate(words))

    def stream(path, **options):
        w = (spark.readStream.schema("word string, n bigint").json(base + "/in").writeStream
             .format("flinkstate").option("operator", "op").option("state", "last")
             .option("stateType", "value").option("keyColumns", "word").option("valueColumns", "n")
             .option("checkpointLocation", path + "-spark").trigger(availableNow=True))
        for k, v in options.items():
            w = w.option(k, v)
        w.start(path).awaitTermination()

    refused(lambda: stream(base + "/s"), "sharedFilesystem=true")
    assert not [f for f in files(base + "/s") if f.endswith(".parquet")], files(base + "/s")
    stream(base + "/s2", sharedFilesystem="true")
    last = spark.read.format("flinkstate").option("operator", "op").option("state", "last").load(base + "/s2")
    assert last.count() == 7
    print("SHARED-ROOT-OK")
    """
)


@pytest.mark.slow
def test_a_local_root_on_a_cluster_is_refused_unless_declared_shared(tmp_path: Path) -> None:
    conf = {"spark.ui.enabled": "false", "spark.executor.memory": "768m", "spark.task.maxFailures": "1"}
    done = run_driver(SCRIPT, str(tmp_path / "roots"), master=LOCAL_CLUSTER, conf=conf, log_level="OFF",
                      directory=tmp_path / "driver", timeout=900)  # fmt: skip
    assert "SHARED-ROOT-OK" in done.stdout, done.stderr[-6000:]
