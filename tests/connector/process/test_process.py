"""The Spark runner on the shared session: results against plain-Python models, restarts,
rescaling, event time, broadcast state, streaming with replays, bad inputs."""

from __future__ import annotations

import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.connector import ProcessError, foreach_batch, process
from flinkstate.connector.process.properties import REUSED, STARTS
from flinkstate.connector.process.run import default_parallelism
from flinkstate.state import ProcessFunctionError, Types, ValueStateDescriptor

import process_functions
from process_functions import (
    RULES,
    BatchLog,
    Failing,
    Sessions,
    ThresholdAlerts,
    WordCount,
    sessions_model,
    stored_counts,
    word_count_model,
)

WC_SCHEMA = "word string, count bigint"


@pytest.fixture(autouse=True, scope="module")
def _functions_by_value() -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(process_functions)


def finals(rows: list[Any]) -> dict[Any, int]:
    """Each word's last running count; asserts the counts of each word are 1..n, each once."""
    seen: dict[Any, list[int]] = defaultdict(list)
    for word, n in rows:
        seen[word].append(n)
    for word, counts in seen.items():
        assert sorted(counts) == list(range(1, len(counts) + 1)), (word, sorted(counts))
    return {w: max(c) for w, c in seen.items()}


def await_batches(query: Any, committed: Any, n: int) -> None:
    """Wait until ``n`` more batches of ``query`` have been committed (at most two minutes)."""
    target = committed() + n
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and committed() < target:
        assert query.exception() is None, query.exception()
        time.sleep(0.2)
    assert committed() >= target, "the stream made no progress"


def run_rate_stream(
    spark: Any, fn: Any, spark_chk: Path, columns: list[str], seconds: float | None, delivered: BatchLog
) -> None:
    """Run ``fn`` over a 40 rows/s rate stream: for ``seconds`` after three batches, then
    stop (which may interrupt a batch after its commit, before the sink got it); with
    ``None``, once with ``availableNow`` (Spark replays what a stop interrupted) to the end."""
    writer = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 40)
        .load()
        .selectExpr(*columns)
        .writeStream.foreachBatch(fn)
        .option("checkpointLocation", str(spark_chk))
    )
    if seconds is None:
        writer.trigger(availableNow=True).start().awaitTermination(120)
        return
    query = writer.trigger(processingTime="400 milliseconds").start()
    await_batches(query, lambda: len(delivered.batches()), 3)
    time.sleep(seconds)
    query.stop()


def delivered_once(delivered: list[tuple[int, list[Any]]]) -> list[Any]:
    """The rows of each batch once: Spark may hand a committed batch to the sink again (in
    order, and then with the same output)."""
    assert [b for b, _ in delivered] == sorted(b for b, _ in delivered)
    by_id: dict[int, list[Any]] = {}
    for batch_id, out in delivered:
        assert sorted(by_id.setdefault(batch_id, out)) == sorted(out)
    return [r for b in sorted(by_id) for r in by_id[b]]


def test_word_count_restart_and_rescale(spark: Any, tmp_path: Path) -> None:
    rnd = random.Random(1)
    chk = tmp_path / "chk"
    batches = [[rnd.choice(["a", "b", "ç", "日本", "", "x y"]) for _ in range(300)] for _ in range(3)]
    emitted: list[Any] = []
    for run, parallelism in enumerate([3, None, 2]):
        words = batches[run]
        df = spark.createDataFrame([(w, i) for i, w in enumerate(words)], "word string, i int")
        out = process(df, "word", WordCount(), WC_SCHEMA, str(chk), "wc", parallelism=parallelism)
        assert out.schema.simpleString() == "struct<word:string,count:bigint>"
        emitted += [tuple(r) for r in out.collect()]
        manifest = open_checkpoint(str(chk)).manifest
        # live or restored at the same parallelism: an increment; the first run and a rescale: full
        assert manifest.incremental == (run == 1)
        starts = manifest.properties[STARTS].split()
        assert len(starts) == (parallelism or 3)
        assert set(starts) <= (
            {"new"} if run == 0 else {"warm", "cached", "cold"} if run == 1 else {"cached", "cold"}
        )
    everything = [w for b in batches for w in b]
    assert finals(emitted) == word_count_model(everything) == stored_counts(chk)
    checkpoint = open_checkpoint(str(chk))
    assert checkpoint.operator("wc").parallelism == 2
    read = spark.read.format("flinkstate").option("operator", "wc").option("state", "count").load(str(chk))
    assert {r.key: r.value for r in read.collect()} == word_count_model(everything)
    assert len(CheckpointStorage(str(chk)).completed_ids()) == 3


def test_runs_on_kept_backends_checkpoint_incrementally(spark: Any, tmp_path: Path) -> None:
    chk = str(tmp_path / "chk")
    runs = [[f"k{i}" for i in range(400)], ["k1", "k7", "ß"], ["k7"]]
    for words in runs:
        process(spark.createDataFrame([(w,) for w in words], "word string"), "word", WordCount(),
                WC_SCHEMA, chk, "wc", parallelism=2).collect()  # fmt: skip
        checkpoint = open_checkpoint(chk)
        if int(checkpoint.manifest.properties[REUSED]) == 2:
            assert checkpoint.manifest.incremental
            own = [f for st in checkpoint.operator("wc").subtasks for f in st.keyed["count"]
                   if f.checkpoint_id == checkpoint.checkpoint_id]  # fmt: skip
            assert sum(f.rows for f in own) == len(set(words))
    assert stored_counts(Path(chk)) == word_count_model(w for ws in runs for w in ws)
    full = str(tmp_path / "full")
    for words in runs:
        df = spark.createDataFrame([(w,) for w in words], "word string")
        process(df, "word", WordCount(), WC_SCHEMA, full, "wc", parallelism=2, incremental=False).collect()
        assert not open_checkpoint(full).manifest.incremental
    assert stored_counts(Path(full)) == stored_counts(Path(chk))


def test_the_output_frame_reads_the_committed_output_only(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([("a",), ("b",), ("a",)], "word string")
    first = process(df, "word", WordCount(), WC_SCHEMA, str(tmp_path / "c"), "wc", parallelism=2)
    second = process(df, "word", WordCount(), WC_SCHEMA, str(tmp_path / "c"), "wc")
    assert sorted(map(tuple, first.collect())) == [("a", 1), ("a", 2), ("b", 1)]
    assert sorted(map(tuple, second.collect())) == [("a", 3), ("a", 4), ("b", 2)]


@pytest.mark.connect
def test_multi_column_keys_and_dict_rows(spark: Any, tmp_path: Path) -> None:
    from flinkstate.state import KeyedProcessFunction

    class PairCount(KeyedProcessFunction):
        def open(self, runtime_context: Any) -> None:
            self.n = runtime_context.get_state(ValueStateDescriptor("n", Types.LONG()))

        def process_element(self, value: Any, ctx: Any) -> Any:
            n = (self.n.value() or 0) + 1
            self.n.update(n)
            a, b = ctx.get_current_key()
            assert (value.a, value.b) == (a, b)
            yield {"n": n, "a": a, "b": b}

    rows = [(i % 3, f"k{i % 2}") for i in range(60)]
    df = spark.createDataFrame(rows, "a int, b string")
    out = process(df, ["a", "b"], PairCount(), "a int, b string, n bigint", str(tmp_path / "c"), "pairs")
    final: dict[tuple[int, str], int] = {}
    for r in out.collect():
        final[(r.a, r.b)] = max(final.get((r.a, r.b), 0), r.n)
    assert final == {k: rows.count(k) for k in set(rows)}


def test_sessions_over_event_time_across_runs(spark: Any, tmp_path: Path) -> None:
    rnd = random.Random(8)
    events = [(rnd.choice(["u1", "u2", "u3", "u4"]), t * 9 + rnd.randrange(7)) for t in range(400)]
    cut = events[200][1]
    runs = [[e for e in events if e[1] < cut], [e for e in events if e[1] >= cut]]
    out: list[Any] = []
    for i, run in enumerate(runs):
        rnd.shuffle(run)  # Spark's order is no order: the runner sorts by event time
        df = spark.createDataFrame(run, "user string, ts bigint")
        result = process(
            df,
            "user",
            Sessions(),
            "user string, start bigint, end bigint, events bigint",
            str(tmp_path / "c"),
            "sessions",
            event_time="ts",
            parallelism=2 + i,
            end_of_input=i == 1,
        )
        out += [tuple(r) for r in result.collect()]
    assert sorted(out) == sessions_model(events)
    props = open_checkpoint(str(tmp_path / "c")).manifest.properties
    assert int(props["flinkstate.process.watermark"]) == max(ts for _, ts in events) - 1  # Flink's


def test_broadcast_rules(spark: Any, tmp_path: Path) -> None:
    words = ["a", "b", "a", "c", "a", "b", "c", "c", "c"]
    df = spark.createDataFrame([(w,) for w in words], "word string")
    rules = spark.createDataFrame([("a", 2), ("c", 4)], "word string, threshold bigint")
    out = process(
        df,
        "word",
        ThresholdAlerts(),
        WC_SCHEMA,
        str(tmp_path / "c"),
        "alerts",
        broadcast=rules,
        parallelism=2,
    )
    assert sorted(map(tuple, out.collect())) == [("a", 2), ("c", 4)]
    checkpoint = open_checkpoint(str(tmp_path / "c"))
    for i in range(2):
        assert dict(checkpoint.operator_backend("alerts", i, 2).get_broadcast_state(RULES).items()) == {
            "a": 2,
            "c": 4,
        }
    # the rules stay; a new rule resets every count (apply_to_keyed_state on each range)
    more = spark.createDataFrame([("b", 1)], "word string, threshold bigint")
    out = process(
        df, "word", ThresholdAlerts(), WC_SCHEMA, str(tmp_path / "c"), "alerts", broadcast=more, parallelism=3
    )
    assert sorted(map(tuple, out.collect())) == [("a", 2), ("b", 1), ("c", 4)]


def test_initial_state_from_a_bootstrapped_savepoint(spark: Any, tmp_path: Path) -> None:
    seed = spark.createDataFrame([("a", 10), ("b", 20)], "word string, count bigint")
    (
        seed.write.format("flinkstate")
        .mode("overwrite")
        .option("operator", "wc")
        .option("state", "count")
        .option("stateType", "value")
        .option("keyColumns", "word")
        .option("valueColumns", "count")
        .option("parallelism", "2")
        .save(str(tmp_path / "sp"))
    )
    df = spark.createDataFrame([("a",), ("c",)], "word string")
    out = process(
        df, "word", WordCount(), WC_SCHEMA, str(tmp_path / "c"), "wc", initial_state=str(tmp_path / "sp")
    )
    assert sorted(map(tuple, out.collect())) == [("a", 11), ("c", 1)]
    assert stored_counts(tmp_path / "c") == {"a": 11, "b": 20, "c": 1}


@pytest.mark.connect
def test_timers_view(spark: Any, tmp_path: Path) -> None:
    events = [("u1", 100), ("u2", 150), ("u1", 120)]
    df = spark.createDataFrame(events, "user string, ts bigint")
    process(
        df,
        "user",
        Sessions(),
        "user string, start bigint, end bigint, events bigint",
        str(tmp_path / "c"),
        "sessions",
        event_time="ts",
        watermark_delay=1000,
    ).collect()
    timers = spark.read.format("flinkstate").option("operator", "sessions").option("timers", "true")
    rows = sorted(
        (r.key, r.namespace, r.time_domain, r.timestamp) for r in timers.load(str(tmp_path / "c")).collect()
    )
    assert rows == [("u1", None, "EVENT_TIME", 150), ("u2", None, "EVENT_TIME", 180)]
    process(
        df.limit(0),
        "user",
        Sessions(),
        "user string, start bigint, end bigint, events bigint",
        str(tmp_path / "c"),
        "sessions",
        event_time="ts",
        end_of_input=True,
    ).collect()
    assert timers.load(str(tmp_path / "c")).count() == 0  # every timer fired


@pytest.mark.connect
def test_streaming_rate_source_restart_rescale_and_replay(spark: Any, tmp_path: Path) -> None:
    chk, spark_chk = tmp_path / "c", tmp_path / "spark-chk"
    sink = BatchLog(tmp_path / "delivered")

    def run_for(seconds: float | None, parallelism: int) -> None:
        fn = foreach_batch(
            "word",
            WordCount(),
            "word bigint, count bigint",
            str(chk),
            "wc",
            sink=sink,
            parallelism=parallelism,
        )
        run_rate_stream(spark, fn, spark_chk, ["value % 7 as word", "value"], seconds, sink)

    run_for(0.5, 2)
    run_for(0.5, 3)
    run_for(None, 3)
    assert open_checkpoint(str(chk)).operator("wc").parallelism == 3
    delivered = sink.batches()
    ids = [b for b, _ in delivered]
    rows = delivered_once(delivered)
    counts = stored_counts(chk)
    assert finals(rows) == counts
    total = sum(counts.values())  # the rate source's values 0..total-1, each exactly once
    assert counts == word_count_model([v % 7 for v in range(total)])
    # Spark replays the last batch after a failure: nothing changes, its output comes again
    last_id, last_out = delivered[-1]
    latest = CheckpointStorage(str(chk)).latest_id()
    replay = foreach_batch("word", WordCount(), "word bigint, count bigint", str(chk), "wc", sink=sink)
    replay(spark.range(5).selectExpr("id % 7 as word", "id as value"), last_id)
    with pytest.raises(ProcessError, match="BATCH_ID_BEHIND"):  # not a replay: a reset query
        replay(spark.range(5).selectExpr("id % 7 as word", "id as value"), last_id - 1)
    assert CheckpointStorage(str(chk)).latest_id() == latest and stored_counts(chk) == counts
    delivered = sink.batches()
    assert delivered[-1][0] == last_id and sorted(delivered[-1][1]) == sorted(last_out)
    assert len(delivered) == len(ids) + 1


@pytest.mark.connect
def test_without_parallelism_a_first_run_takes_sparks_default(spark: Any, tmp_path: Path) -> None:
    """local[2] gives two subtasks, on a Spark Connect session too (it has no SparkContext)."""
    words = ["a", "b", "ç", "a", "日本", "b", "a"]
    df = spark.createDataFrame([(w,) for w in words], "word string")
    out = process(df, "word", WordCount(), WC_SCHEMA, str(tmp_path / "c"), "wc").collect()
    assert finals([tuple(r) for r in out]) == word_count_model(words)
    assert open_checkpoint(str(tmp_path / "c")).operator("wc").parallelism == 2


class _ConnectLike:
    """A session shaped like Spark Connect's: no ``sparkContext``, a runtime conf."""

    def __init__(self, conf: dict[str, str]) -> None:
        self.conf = conf

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)


def test_without_a_spark_context_the_default_parallelism_conf_counts() -> None:
    assert default_parallelism(_ConnectLike({"spark.default.parallelism": "5"})) == 5


@pytest.mark.connect
def test_a_failing_function_commits_nothing(spark: Any, tmp_path: Path) -> None:
    chk = str(tmp_path / "c")
    df = spark.createDataFrame([("ok",), ("fine",)], "word string")
    process(df, "word", Failing(), WC_SCHEMA, chk, "f", parallelism=2).collect()
    bad = spark.createDataFrame([("ok",), ("boom",)], "word string")
    with pytest.raises(ProcessFunctionError, match=r"for key 'boom' on subtask \d of 2.*boom is not a word"):
        process(bad, "word", Failing(), WC_SCHEMA, chk, "f")
    assert CheckpointStorage(chk).completed_ids() == [1]
    again = process(df, "word", Failing(), WC_SCHEMA, chk, "f")  # takes the failed run's id
    assert sorted(map(tuple, again.collect())) == [("fine", 1), ("ok", 1)]
    assert CheckpointStorage(chk).completed_ids() == [1, 2]


@pytest.mark.connect
def test_output_rows_that_do_not_fit(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([("a",)], "word string")
    with pytest.raises(ProcessError, match=r"OUTPUT_SCHEMA_MISMATCH.*'count'"):
        process(df, "word", WordCount(), "word string, count string", str(tmp_path / "c"), "wc")
    with pytest.raises(ProcessError, match=r"OUTPUT_SCHEMA_MISMATCH.*2 values.*3 columns"):
        process(df, "word", WordCount(), "word string, count bigint, x int", str(tmp_path / "c"), "wc")
    assert CheckpointStorage(str(tmp_path / "c")).completed_ids() == []


@pytest.mark.connect
def test_bad_arguments_fail_before_any_task(spark: Any, tmp_path: Path) -> None:
    chk = str(tmp_path / "c")
    df = spark.createDataFrame([("a", 1)], "word string, n bigint")
    with pytest.raises(ProcessError, match="UNKNOWN_COLUMN"):
        process(df, "nope", WordCount(), WC_SCHEMA, chk, "wc")
    with pytest.raises(ProcessError, match="UNKNOWN_COLUMN"):
        process(df, "word", WordCount(), WC_SCHEMA, chk, "wc", event_time="nope")
    with pytest.raises(ProcessError, match="epoch milliseconds"):
        process(df, "word", WordCount(), WC_SCHEMA, chk, "wc", event_time="word")
    with pytest.raises(ProcessError, match="INVALID_FUNCTION"):
        process(df, "word", object(), WC_SCHEMA, chk, "wc")
    with pytest.raises(ProcessError, match="unknown option"):
        process(df, "word", WordCount(), WC_SCHEMA, chk, "wc", paralelism=2)
    with pytest.raises(ProcessError, match=r"\[INVALID_OPTION\] backend must be one of"):
        process(df, "word", WordCount(), WC_SCHEMA, chk, "wc", backend="disk")
    assert not (tmp_path / "c").exists()
    process(df, "word", WordCount(), WC_SCHEMA, chk, "wc", parallelism=2).collect()
    with pytest.raises(ProcessError, match="KEY_TYPE_MISMATCH"):
        process(df, "n", WordCount(), "word bigint, count bigint", chk, "wc")
    with pytest.raises(ProcessError, match="MAX_PARALLELISM_MISMATCH"):
        process(df, "word", WordCount(), WC_SCHEMA, chk, "wc", max_parallelism=64)
    with pytest.raises(ProcessError, match="CHECKPOINT_SHARED"):
        process(df, "word", WordCount(), WC_SCHEMA, chk, "other")
    with pytest.raises(ProcessError, match="parallelism"):
        process(df, "word", WordCount(), WC_SCHEMA, chk, "wc", parallelism=129)
    assert CheckpointStorage(chk).completed_ids() == [1]


def test_sessions_over_a_rate_stream_across_a_restart(spark: Any, tmp_path: Path) -> None:
    chk, spark_chk = tmp_path / "c", tmp_path / "spark-chk"
    sink = BatchLog(tmp_path / "delivered")
    schema = "user bigint, start bigint, end bigint, events bigint"

    def run_for(seconds: float | None, parallelism: int) -> None:
        fn = foreach_batch(
            "user",
            Sessions(),
            schema,
            str(chk),
            "sessions",
            event_time="ts",
            parallelism=parallelism,
            sink=sink,
        )
        columns = ["value % 3 as user", "value * 4 + (value div 25) * 50 as ts", "value"]
        run_rate_stream(spark, fn, spark_chk, columns, seconds, sink)

    run_for(0.5, 2)
    run_for(0.5, 1)
    run_for(None, 1)
    emitted = delivered_once(sink.batches())
    checkpoint = open_checkpoint(str(chk))
    assert checkpoint.operator("sessions").parallelism == 1
    open_sessions = (
        spark.read.format("flinkstate")
        .option("operator", "sessions")
        .option("state", "session")
        .option("includeExpired", "true")
        .load(str(chk))
        .collect()
    )
    still_open = [(r.key, *r.value) for r in open_sessions]
    total = sum(n for *_, n in emitted + still_open)  # the values 0..total-1, each exactly once
    values = range(total)
    model = sessions_model((v % 3, v * 4 + (v // 25) * 50) for v in values)
    assert sorted(emitted + still_open) == model
    watermark = int(checkpoint.manifest.properties["flinkstate.process.watermark"])
    assert all(end + process_functions.GAP > watermark for _, _, end, _ in still_open)


def test_word_count_on_s3(spark: Any, s3_options: dict[str, Any]) -> None:
    root = f"s3://{s3_options['bucket']}/jobs/wc"
    df = spark.createDataFrame([("a",), ("b",), ("a",)], "word string")
    for expected in ([("a", 1), ("a", 2), ("b", 1)], [("a", 3), ("a", 4), ("b", 2)]):
        out = process(
            df,
            "word",
            WordCount(),
            WC_SCHEMA,
            root,
            "wc",
            parallelism=2,
            storage_options=s3_options["options"],
        )
        assert sorted(map(tuple, out.collect())) == expected
    assert CheckpointStorage(root, s3_options["options"]).completed_ids() == [1, 2]


def test_rocksdb_backend_gives_the_heap_results(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([(w,) for w in ["a", "b", "a", "c", "a"]], "word string")
    outputs = {}
    for backend in ("heap", "rocksdb"):
        runs = []
        for parallelism in (2, 3):  # the second run continues (and rescales) the first
            out = process(
                df,
                "word",
                WordCount(),
                WC_SCHEMA,
                str(tmp_path / backend),
                "wc",
                backend=backend,
                parallelism=parallelism,
            )
            runs.append(sorted(map(tuple, out.collect())))
        outputs[backend] = runs
    assert outputs["rocksdb"] == outputs["heap"]
    assert stored_counts(tmp_path / "rocksdb") == word_count_model(["a", "b", "a", "c", "a"] * 2)
    subtasks = open_checkpoint(str(tmp_path / "rocksdb")).manifest.operators
    keyed = [st for op in subtasks for st in op.subtasks if st.key_group_range is not None]
    assert keyed and all(st.native is not None for st in keyed)  # RocksDB checkpoints natively by default
