"""A KeyedProcessFunction restoring a Flink savepoint converted to ours (``convert --to
flinkstate``) fires the savepoint's timers as Flink would have: each once, with its key and
timestamp, event-time ones when the watermark reaches them, processing-time ones when the clock
does; against the model (TimersJob, Flink 2.3/1.20/1.17, heap and RocksDB), against what Flink
2.3 itself fired restoring a savepoint (written/windows), and through the Spark runner."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from flink_model import FIXTURES, fixture
from timers_model import EVENT, FAR, LONG_MAX, OPERATORS, TIMER_KINDS, model, our_timers, sources
from window_model import WINDOWS_WRITTEN, parse_fired

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.checkpoint.flink import import_savepoint, read_savepoint
from flinkstate.connector import process
from flinkstate.state.operator import OperatorStateBackend
from flinkstate.state.process.operator import KeyedProcessOperator
from flinkstate.state.ttl import ManualTimeProvider

import process_functions
from process_functions import TimerLog

Fired = tuple[Any, int, str, int]  # key, timestamp, time domain, watermark when fired


def fire_all(ours: CompletedCheckpoint, uid: str, parallelism: int) -> list[Fired]:
    """Every subtask of ``uid`` restored under TimerLog: the watermark moves to just before and
    then onto each event-time timer's time, the clock likewise to each processing-time one's."""
    fired: list[Fired] = []
    for subtask in range(parallelism):
        clock = ManualTimeProvider(0)
        backend = ours.keyed_backend(uid, subtask, parallelism, time_provider=clock)
        op = KeyedProcessOperator(
            TimerLog(), backend, OperatorStateBackend(), subtask=subtask, parallelism=parallelism, clock=clock
        )
        op.open()
        event = sorted({t for _, t in op.event_timers.timers()})
        processing = sorted({t for _, t in op.processing_timers.timers()})
        for t in event:
            op.advance_watermark(t - 1)
            assert op.drain() == [], f"a timer fired before the watermark reached {t}"
            op.advance_watermark(t)
            fired.extend(op.drain())
        for t in processing:
            clock.now = t - 1
            op.advance_processing_time()
            assert op.drain() == []
            clock.now = t
            op.advance_processing_time()
            fired.extend((k, ts, d, t) for k, ts, d, _ in op.drain())
        assert len(op.event_timers) == len(op.processing_timers) == 0
    return fired


@pytest.mark.parametrize(("version", "kind"), sources(TIMER_KINDS))
def test_converted_timers_fire_once_at_their_time(version: str, kind: str, tmp_path: Path) -> None:
    ours = import_savepoint(
        read_savepoint(str(fixture(version, kind))), str(tmp_path / "o"), uids=list(OPERATORS)
    )
    for uid in OPERATORS:
        fired = fire_all(ours, uid, 2)
        assert max(Counter(fired).values()) == 1
        # each fired when the watermark (or the clock) was its timestamp
        want = {
            (key, ts, "EVENT_TIME" if q == EVENT else "PROCESSING_TIME", ts)
            for q, _, key, _, ts in model(uid)
        }
        assert set(fired) == want and len(fired) == len(want)


def test_fired_as_flink_fired_them(tmp_path: Path) -> None:
    """written/windows: what Flink 2.3 fired restoring it is what our runner fires from it converted."""
    written = FIXTURES / "written" / "windows"
    ours = import_savepoint(read_savepoint(str(written / "savepoint")), str(tmp_path / "o"), uids=["timers"],
                            operators=["timers"])  # fmt: skip
    p, max_p = WINDOWS_WRITTEN["parallelism"], WINDOWS_WRITTEN["max_parallelism"]
    for backend in ("hashmap", "rocksdb"):
        lines = (written / f"restored-{backend}.tsv").read_text(encoding="utf-8").splitlines()
        flink = parse_fired([line for line in lines if line.startswith("timers\t")], p, max_p)
        assert len(flink) > 30
        ran = fire_all(ours, "timers", p["timers"])
        assert sorted((k, ts, d) for k, ts, d, _ in ran) == sorted((k, ts, d) for _, d, k, _, _, ts in flink)


def test_window_timers_are_carried_not_fired(tmp_path: Path) -> None:
    """window-sum's timers are its window operator's (service window-timers, TimeWindow
    namespaces): a KeyedProcessFunction restoring that operator does not fire them (neither does
    Flink's KeyedProcessOperator), and its next checkpoint still holds every one."""
    source = read_savepoint(str(fixture("1.20", "heap_canonical")))
    ours = import_savepoint(source, str(tmp_path / "o"), uids=["window-sum"], operators=["window-sum"])
    assert fire_all(ours, "window-sum", 2) == []
    want = our_timers(ours, "window-sum")
    pending = CheckpointStorage(str(tmp_path / "next")).begin()
    for subtask in range(2):
        backend = ours.keyed_backend("window-sum", subtask, 2)
        op = KeyedProcessOperator(TimerLog(), backend, subtask=subtask, parallelism=2)
        op.open()
        op.advance_watermark(LONG_MAX)
        assert op.drain() == []
        pending.write_keyed("window-sum", backend, subtask, 2)
    assert our_timers(pending.commit(), "window-sum") == want and len(want) > 10


def test_spark_process_fires_converted_timers_at_the_watermark(spark: Any, tmp_path: Path) -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(process_functions)
    seed = str(tmp_path / "seed")
    import_savepoint(
        read_savepoint(str(fixture("1.17", "timers_rocksdb"))), seed, uids=["timers"], operators=["timers"]
    )
    schema = "key bigint, ts bigint, domain string, watermark bigint"
    root = str(tmp_path / "job")
    df = spark.createDataFrame([(3, 5001)], "key bigint, ts bigint")  # the watermark after it: 5000
    run = {"event_time": "ts", "parallelism": 2}
    first = [
        tuple(r)
        for r in process(df, "key", TimerLog(), schema, root, "timers", initial_state=seed, **run).collect()
    ]
    event = {(k, ts) for q, _, k, _, ts in model("timers") if q == EVENT}
    assert sorted((k, ts) for k, ts, _, _ in first) == sorted(e for e in event if e[1] <= 5000)
    assert all(d == "EVENT_TIME" and w == 5000 for _, _, d, w in first)
    none = spark.createDataFrame([], "key bigint, ts bigint")
    rest = [
        tuple(r)
        for r in process(none, "key", TimerLog(), schema, root, "timers", end_of_input=True, **run).collect()
    ]
    assert sorted((k, ts) for k, ts, _, _ in rest) == sorted(e for e in event if e[1] > 5000)  # each once
    view = spark.read.format("flinkstate").option("operator", "timers").option("timers", "true").load(root)
    left = sorted((r.key, r.time_domain, r.timestamp) for r in view.collect())
    assert left == [(n, "PROCESSING_TIME", FAR + n) for n in range(0, 20, 3)]  # 2100 has not come
