"""The Spark paths that write a version keep what they do not mean to change, field by field
(see tests/checkpoint/writing/test_version_fields.py for the paths that need no SparkSession):
``process`` and ``foreach_batch`` runs with increments and a compaction, and a bootstrap
append by ``df.write``, on a base ``process`` wrote with event time (subtask watermarks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from version_fields import Step, unmeant

from flinkstate.checkpoint import Manifest, open_checkpoint
from flinkstate.checkpoint.writing.versions import rebase
from flinkstate.connector import foreach_batch, process

import process_functions
from process_functions import WordCount

SCHEMA = "word string, count bigint"
UID = "wc"
TOP: list[Step] = [("checkpoint_id",), ("kind",), ("properties",), ("created_at_ms",), ("incremental",)]
# a run writes its state's files (increments, a compaction's changes), moves the watermark
# and replaces its output
RUN: list[Step] = [
    *TOP,
    *[("operators", UID, "subtasks", "*", part) for part in ("keyed", "changes", "watermark")],
    ("operators", f"{UID}/output", "subtasks"),
]


@pytest.fixture(autouse=True, scope="module")
def _functions_by_value() -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(process_functions)


def _latest(root: Path) -> Manifest:
    return open_checkpoint(str(root)).manifest


def _same_place(new: Manifest, old: Manifest) -> Manifest:
    return rebase(new, f"chk-{new.checkpoint_id}", f"chk-{old.checkpoint_id}")


def test_process_foreach_batch_and_append_change_only_what_they_mean_to(spark: Any, tmp_path: Path) -> None:
    """Each run is compared with the version before it. Whether a worker kept its backend
    (an increment, and past the chain bound a compaction) is Spark's choice here; the
    checkpoint paths are driven deterministically in tests/checkpoint/writing/test_version_fields.py."""
    root = tmp_path / "root"
    words = [f"w{i}" for i in range(30)]

    def frame(chosen: list[str], at: int) -> Any:
        return spark.createDataFrame([(w, at + i) for i, w in enumerate(chosen)], "word string, ts bigint")

    steps: list[tuple[str, Manifest, Manifest, list[Step]]] = []
    process(frame(words, 1000), "word", WordCount(), SCHEMA, str(root), UID, parallelism=2,
            event_time="ts").collect()  # fmt: skip
    for run in range(4):
        before = _latest(root)
        chosen = words if run % 2 else words[:3]
        process(frame(chosen, 2000 + 1000 * run), "word", WordCount(), SCHEMA, str(root), UID,
                event_time="ts").collect()  # fmt: skip
        steps.append((f"process {run}", before, _latest(root), RUN))
    before = _latest(root)
    batch = foreach_batch("word", WordCount(), SCHEMA, str(root), UID, event_time="ts")
    batch(frame(words[3:6], 9000), 0)
    steps.append(("foreach_batch", before, _latest(root), RUN))
    before = _latest(root)
    values = spark.createDataFrame([(w, len(w)) for w in words], "word string, n bigint")
    (values.write.format("flinkstate").mode("append").option("operator", UID).option("state", "n")
     .option("stateType", "value").option("keyColumns", "word").option("parallelism", "2")
     .save(str(root)))  # fmt: skip
    appended: list[Step] = [*TOP, ("operators", UID, "keyed_states", "n")]
    appended.append(("operators", UID, "subtasks", "*", "keyed", "n"))
    steps.append(("append", before, _latest(root), appended))
    for name, old, new, meant in steps:
        assert new.checkpoint_id == old.checkpoint_id + 1, name
        assert None not in [st.watermark for st in new.operator(UID).subtasks], name
        assert unmeant(old, _same_place(new, old), meant) == [], name
