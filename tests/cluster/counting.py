"""The keyed running count the cluster tier runs: its input per run, its plain-Python model,
a slow variant that tells the test where it runs (to kill that process mid-run), the driver's
loop over runs, and the committed counts read back from a checkpoint."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from flinkstate.state import KeyedProcessFunction, Types, ValueStateDescriptor

from process_functions import WordCount

KEYS = 3000
UID = "count"
OUTPUT_SCHEMA = "word string, count bigint"
PARALLELISM = {1: 2, 2: 2, 3: 3, 4: 2}
"""Each run's parallelism: run 3 rescales (restores from the checkpoint), run 4 back again."""


DRIVER = """
from cluster.counting import drive
drive(spark, sys.argv[1:])
"""
"""The tier's driver: ``drive`` with the test's arguments."""


def run_words(run: int) -> list[str]:
    """Run ``run``'s input: every key 1-3 times, the multiplicities shifting from run to run."""
    return [f"k{i}" for i in range(KEYS) for _ in range(1 + (i + run) % 3)]


def counts_of(words: Iterable[str]) -> dict[str, int]:
    """Each word's number of elements."""
    counts: dict[str, int] = {}
    for word in words:
        counts[word] = counts.get(word, 0) + 1
    return counts


def count_model(runs: Iterable[int]) -> dict[str, int]:
    """Each key's count after the runs ``runs``."""
    return counts_of(word for run in runs for word in run_words(run))


class SlowCount(WordCount):
    """The running count, pausing ``pause`` s every ``every`` elements; on its first element a
    task writes its Python worker's pid to ``<marker_dir>/<pid>`` (the test kills it there)."""

    def __init__(self, marker_dir: str, every: int = 100, pause: float = 0.1) -> None:
        self.marker_dir, self.every, self.pause = marker_dir, every, pause

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self.seen = 0

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        if self.seen == 0:
            with open(os.path.join(self.marker_dir, str(os.getpid())), "w") as marker:
                marker.write(str(os.getpid()))
        self.seen += 1
        if self.seen % self.every == 0:
            time.sleep(self.pause)
        yield from super().process_element(value, ctx)


def check_output(rows: Iterable[Any], before: Mapping[str, int], words: list[str]) -> None:
    """A run's output is exact: each key of ``words`` emitted once per element, counting on
    from its count ``before``, and nothing else."""
    emitted: dict[str, list[int]] = {}
    for word, count in rows:
        emitted.setdefault(word, []).append(count)
    added = counts_of(words)
    wrong = {}
    for word in set(emitted) | set(added):
        start = before.get(word, 0)
        got = sorted(emitted.get(word, []))
        if got != list(range(start + 1, start + added.get(word, 0) + 1)):
            wrong[word] = got
    assert not wrong, f"{len(wrong)} keys emitted wrong counts, e.g. {sorted(wrong.items())[:3]}"


def drive(spark: Any, argv: list[str]) -> None:
    """The driver: ``root``, storage options (JSON), backend, then one function per run
    (``count``: must commit; ``slow:<marker dir>``: may fail, a test kills a process in it).
    Prints ``RUN <n> COMMITTED ...`` or ``RUN <n> FAILED ...`` per run, then ``DRIVER DONE``
    and the committed runs (JSON)."""
    from flinkstate.connector import process

    root, options, backend, plan = argv[0], json.loads(argv[1]), argv[2], argv[3:]
    committed: list[int] = []
    for run, step in enumerate(plan, start=1):
        words = run_words(run)
        df = spark.createDataFrame([(w,) for w in words], "word string").repartition(2)
        function = WordCount() if step == "count" else SlowCount(step.split(":", 1)[1])
        before = count_model(committed)
        started = time.monotonic()
        try:
            out = process(df, "word", function, OUTPUT_SCHEMA, root, UID, backend=backend,
                          storage_options=options, parallelism=PARALLELISM[run])  # fmt: skip
            rows = out.collect()
        except Exception as error:
            if step == "count":
                raise
            took = time.monotonic() - started
            print(f"RUN {run} FAILED after {took:.1f} s: {str(error).splitlines()[0][:300]}", flush=True)
            continue
        check_output(((r.word, r["count"]) for r in rows), before, words)
        committed.append(run)
        print(f"RUN {run} COMMITTED in {time.monotonic() - started:.1f} s", flush=True)
    print("DRIVER DONE", json.dumps(committed), flush=True)


def stored_counts(root: str, options: Mapping[str, Any], checkpoint_id: int | None = None) -> dict[str, int]:
    """The ``count`` state of every key in checkpoint ``checkpoint_id`` (default: the latest)."""
    from flinkstate.checkpoint import open_checkpoint

    checkpoint = open_checkpoint(root, options, checkpoint_id=checkpoint_id)
    backend = checkpoint.keyed_backend(UID, 0, 1)  # one subtask: every key group
    try:
        state = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
        out: dict[str, int] = {}
        for key in list(backend.get_keys("count")):
            backend.set_current_key(key)
            value = state.value()
            assert value is not None
            out[key] = value
        return out
    finally:
        backend.close()


def committed_states_match(root: str, options: Mapping[str, Any], committed: list[int]) -> None:
    """Checkpoint ``n`` is the ``n``-th committed run's (a failed run takes no id): each one
    retained under ``root`` holds the model of the runs committed up to it."""
    from flinkstate.checkpoint import CheckpointStorage

    ids = CheckpointStorage(root, options).completed_ids()
    assert ids and ids[-1] == len(committed), (ids, committed)
    for checkpoint_id in ids:
        stored = stored_counts(root, options, checkpoint_id)
        model = count_model(committed[:checkpoint_id])
        assert stored == model, f"checkpoint {checkpoint_id}: {len(stored)} keys, model {len(model)}"
