"""A retried Spark task commits its side outputs once: the first attempt of a task fails
after yielding to both side outputs, Spark retries it (``local[2,2]``: two attempts per
task), and the committed main and side outputs equal the model's, no row twice. Runs in a
subprocess (a master with retries needs its own SparkContext)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, sys
    from collections import Counter
    sys.path.insert(0, sys.argv[2])
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession
    import side_functions
    from side_functions import LONG_WORDS, MILESTONES, MilestonesFailFirstAttempt, milestones_model
    from flinkstate.connector import process, read_side_output
    cloudpickle.register_pickle_by_value(side_functions)
    chk, marker = sys.argv[1] + "/chk", sys.argv[1] + "/marker"
    spark = (SparkSession.builder.master("local[2,2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
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
    spark.stop()
    """
)


@pytest.mark.slow
def test_a_retried_task_commits_its_side_outputs_once(tmp_path: Path) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    tests = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), tests],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "SIDE-RETRY-OK" in done.stdout, done.stderr[-6000:]
    from flinkstate.checkpoint import CheckpointStorage

    assert CheckpointStorage(str(tmp_path / "chk")).completed_ids() == [1]
