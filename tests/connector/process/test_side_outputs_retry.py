"""A retried Spark task commits its side outputs once: the first attempt of a task fails
after yielding to both side outputs, Spark retries it (``local[2,2]``: two attempts per
task), and the committed main and side outputs equal the model's, no row twice. Runs in a
subprocess (a master with retries needs its own SparkContext)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.spark import run_driver

SCRIPT = """
from collections import Counter
from pyspark import cloudpickle
import side_functions
from side_functions import LONG_WORDS, MILESTONES, MilestonesFailFirstAttempt, milestones_model
from flinkstate.connector import process, read_side_output
cloudpickle.register_pickle_by_value(side_functions)
chk, marker = sys.argv[1] + "/chk", sys.argv[1] + "/marker"
words = [f"wörd{i % 7}" if i % 3 else f"w{i % 5}" for i in range(400)]
df = spark.createDataFrame([(w,) for w in words], "word string")
function = MilestonesFailFirstAttempt(marker, "wörd3")
out = process(df, "word", function, "word string, count bigint", chk, "ms", parallelism=2,
              side_outputs=[LONG_WORDS, MILESTONES])
rows = lambda frame: Counter(tuple(r) for r in frame.collect())
main, side = milestones_model(words)
assert os.path.exists(marker), "the failure was not injected"
assert rows(out) == Counter(main), "main output"
long_words = Counter((w,) for w in side[LONG_WORDS.tag_id])
assert rows(read_side_output(spark, chk, "ms", LONG_WORDS)) == long_words
assert rows(read_side_output(spark, chk, "ms", MILESTONES)) == Counter(side[MILESTONES.tag_id])
print("SIDE-RETRY-OK")
"""


@pytest.mark.slow
def test_a_retried_task_commits_its_side_outputs_once(tmp_path: Path) -> None:
    done = run_driver(SCRIPT, str(tmp_path), master="local[2,2]", log_level="OFF",
                      conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
                      directory=tmp_path / "driver")  # fmt: skip
    assert "SIDE-RETRY-OK" in done.stdout, done.failure()
    from flinkstate.checkpoint import CheckpointStorage

    assert CheckpointStorage(str(tmp_path / "chk")).completed_ids() == [1]
