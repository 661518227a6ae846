"""The driver of the live-state tests: the keyed running count on two roots at once (heap
and RocksDB), run after run, with pauses longer than Spark keeps an idle Python worker; per
run, what the committed checkpoint says of each subtask (how it started, what it downloaded,
where it ran) and what the next run restores from (each file's size and writer)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from .counting import OUTPUT_SCHEMA, UID, check_output, count_model, run_words

PAUSE_S = 65
"""Longer than Spark keeps an idle Python worker (a hard-coded minute)."""
LIVE_DRIVER = """
from cluster.live_runs import drive_live
drive_live(spark, sys.argv[1:])
"""


def describe(root: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The latest checkpoint under ``root``: its id, whether it is an increment, how each
    subtask started, what it downloaded, where it ran, and its files (size, writer)."""
    from flinkstate.checkpoint import open_checkpoint

    checkpoint = open_checkpoint(root, options)
    props = checkpoint.manifest.properties
    op = checkpoint.manifest.operator(UID)
    assert op is not None
    return {
        "checkpoint": checkpoint.checkpoint_id,
        "incremental": checkpoint.manifest.incremental,
        "starts": props["flinkstate.process.subtask_starts"].split(),
        "downloaded": [int(b) for b in props["flinkstate.process.subtask_downloaded_bytes"].split()],
        "executors": props["flinkstate.process.subtask_executors"].split(),
        "locations": props.get("flinkstate.process.subtask_locations", "").split()[1:],
        "files": {
            str(st.index): [(f.size, f.checkpoint_id or checkpoint.checkpoint_id) for f in st.files()]
            for st in op.subtasks
        },
    }


def drive_live(spark: Any, argv: list[str]) -> None:
    """``roots`` (JSON: backend -> root), storage options (JSON), then steps: ``run``,
    ``swap`` (a run that prefers for each subtask where the other ran last: each moves),
    ``pause``, or ``after:<n>`` (n runs were made before, by another driver). Prints
    ``LIVE <backend> <json>`` after each run of each backend."""
    from flinkstate.connector import process
    from flinkstate.connector.process import placement

    from process_functions import WordCount

    roots, options, steps = json.loads(argv[0]), json.loads(argv[1]), argv[2:]
    preferred = placement.preferred
    run = 0
    for step in steps:
        if step == "pause":
            time.sleep(PAUSE_S)
            continue
        if step.startswith("after:"):
            run = int(step.split(":")[1])
            continue
        run += 1
        if step == "swap":  # a test's hand on the placement: the run's preferences, reversed
            placement.preferred = partial(_reversed, preferred)
        words = run_words(run)
        df = spark.createDataFrame([(w,) for w in words], "word string").repartition(2)
        for backend, root in roots.items():
            out = process(df, "word", WordCount(), OUTPUT_SCHEMA, root, UID, backend=backend,
                          storage_options=options, parallelism=2)  # fmt: skip
            check_output(((r.word, r["count"]) for r in out.collect()), count_model(range(1, run)), words)
            print(
                "LIVE", backend, json.dumps({"run": run, "step": step, **describe(root, options)}), flush=True
            )
        placement.preferred = preferred


def _reversed(preferred: Callable[..., list[str]], *args: Any) -> list[str]:
    return list(reversed(preferred(*args)))


def lacking(runs: list[dict[str, Any]], i: int, subtask: int) -> int:
    """Bytes of the files run ``i`` restored subtask ``subtask`` from that its executor did
    not hold: those written after the last checkpoint that executor wrote of the subtask."""
    executor = runs[i]["executors"][subtask]
    held = [r["checkpoint"] for r in runs[:i] if r["executors"][subtask] == executor]
    since = max(held, default=0)
    return sum(size for size, writer in runs[i - 1]["files"][str(subtask)] if writer > since)
