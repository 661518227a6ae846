"""Side outputs on Spark: ``process`` and ``foreach_batch`` with ``side_outputs=``, each read
back as its own DataFrame from the checkpoint that committed the main output, against a
plain-Python model; replays and failed runs commit no side row twice; typed errors."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import side_functions
from side_functions import (
    LONG_WORDS,
    MILESTONES,
    Milestones,
    YieldsTo,
    milestones_model,
)

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.connector import ProcessError, foreach_batch, process, read_side_output
from flinkstate.state import OutputTag

WC = "word string, count bigint"
FIRST = ["straße", "ok", "日本語テキスト", "ok", "straße", "ok", "ok", "straße", "straße", "🍕ünïcödé"] * 3
SECOND = ["ok", "straße", "ok", "新しい言葉です", "ok"]
pytestmark = pytest.mark.connect


@pytest.fixture(autouse=True, scope="module")
def _functions_by_value() -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(side_functions)


def _words(spark: Any, words: list[str]) -> Any:
    return spark.createDataFrame([(w,) for w in words], "word string")


def _rows(df: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r) for r in df.collect())


def _expected(
    words: list[str], counts: dict[str, int] | None = None
) -> tuple[Counter[Any], dict[str, Counter[Any]]]:
    main, side = milestones_model(words, counts)
    long_words = Counter((w,) for w in side[LONG_WORDS.tag_id])
    return Counter(main), {LONG_WORDS.tag_id: long_words, MILESTONES.tag_id: Counter(side[MILESTONES.tag_id])}


def test_process_commits_each_side_output_with_the_output(spark: Any, tmp_path: Path) -> None:
    chk = str(tmp_path / "c")
    tags = [LONG_WORDS, MILESTONES]
    out = process(_words(spark, FIRST), "word", Milestones(), WC, chk, "ms", parallelism=2, side_outputs=tags)
    main, side = _expected(FIRST)
    assert _rows(out) == main
    late = read_side_output(spark, chk, "ms", LONG_WORDS)
    assert late.columns == ["value"] and _rows(late) == side[LONG_WORDS.tag_id]
    marks = read_side_output(spark, chk, "ms", "milestones")
    assert marks.columns == ["word", "count", "note"] and _rows(marks) == side[MILESTONES.tag_id]
    assert dict(marks.dtypes) == {"word": "string", "count": "bigint", "note": "string"}
    # a second run at another parallelism continues the counts; each checkpoint has its own rows
    counts = {w: n for w, n in milestones_model(FIRST)[0]}
    out = process(
        _words(spark, SECOND), "word", Milestones(), WC, chk, "ms", parallelism=3, side_outputs=tags
    )
    main, side = _expected(SECOND, counts)
    assert _rows(out) == main
    assert _rows(read_side_output(spark, chk, "ms", MILESTONES)) == side[MILESTONES.tag_id]
    first = read_side_output(spark, chk, "ms", MILESTONES, checkpoint_id=1)
    assert _rows(first) == _expected(FIRST)[1][MILESTONES.tag_id]
    with pytest.raises(
        ProcessError, match=r"\[SIDE_OUTPUT_UNKNOWN_TAG\].*'nope'.*'long wörds', 'milestones'"
    ):
        read_side_output(spark, chk, "ms", OutputTag("nope"))


def test_a_declared_schema_names_the_columns(spark: Any, tmp_path: Path) -> None:
    chk = str(tmp_path / "c")
    sides = {LONG_WORDS: "long_word string", MILESTONES: None}
    process(_words(spark, FIRST), "word", Milestones(), WC, chk, "ms", parallelism=2, side_outputs=sides)
    got = read_side_output(spark, chk, "ms", LONG_WORDS)
    assert got.columns == ["long_word"] and _rows(got) == _expected(FIRST)[1][LONG_WORDS.tag_id]


def test_foreach_batch_side_sinks_and_a_replay_commit_once(spark: Any, tmp_path: Path) -> None:
    chk = str(tmp_path / "c")
    got: list[tuple[str, int, Counter[Any]]] = []

    def sink_of(name: str) -> Any:
        return lambda df, batch_id: got.append((name, batch_id, _rows(df)))

    run = foreach_batch(
        "word",
        Milestones(),
        WC,
        chk,
        "ms",
        sink=sink_of("main"),
        side_sinks={MILESTONES: sink_of("milestones"), LONG_WORDS.tag_id: sink_of("long")},
        side_outputs=[LONG_WORDS, MILESTONES],
        parallelism=2,
    )
    run(_words(spark, FIRST), 0)
    run(_words(spark, FIRST), 0)  # Spark's replay of the last batch after a failure
    run(_words(spark, SECOND), 1)
    main0, side0 = _expected(FIRST)
    main1, side1 = _expected(SECOND, {w: n for w, n in milestones_model(FIRST)[0]})
    batch0 = [
        ("main", 0, main0),
        ("milestones", 0, side0["milestones"]),
        ("long", 0, side0[LONG_WORDS.tag_id]),
    ]
    batch1 = [
        ("main", 1, main1),
        ("milestones", 1, side1["milestones"]),
        ("long", 1, side1[LONG_WORDS.tag_id]),
    ]
    assert got == batch0 + batch0 + batch1
    assert CheckpointStorage(chk).completed_ids() == [1, 2]
    assert _rows(read_side_output(spark, chk, "ms", MILESTONES, checkpoint_id=1)) == side0["milestones"]
    with pytest.raises(ProcessError, match=r"\[SIDE_OUTPUT_UNKNOWN_TAG\].*\['other'\]"):
        foreach_batch(
            "word", Milestones(), WC, chk, "ms", side_sinks={"other": print}, side_outputs=[MILESTONES]
        )(_words(spark, SECOND), 2)
    assert CheckpointStorage(chk).completed_ids() == [1, 2]


def test_bad_side_outputs_commit_nothing(spark: Any, tmp_path: Path) -> None:
    chk = str(tmp_path / "c")
    df = _words(spark, ["straße", "straße"])
    with pytest.raises(ProcessError, match=r"\[SIDE_OUTPUT_UNKNOWN_TAG\] .*side output 'long wörds'"):
        process(df, "word", Milestones(), WC, chk, "ms", parallelism=2)  # yields to tags not declared
    with pytest.raises(ProcessError, match=r"\[SIDE_OUTPUT_SCHEMA_MISMATCH\].*'milestones'.*'count'"):
        bad = YieldsTo(MILESTONES, ("w", "not a count", None))
        process(df, "word", bad, WC, chk, "ms", parallelism=2, side_outputs=[MILESTONES])
    with pytest.raises(ProcessError, match=r"\[SIDE_OUTPUT_NO_SCHEMA\].*'raw'"):
        process(df, "word", Milestones(), WC, chk, "ms", side_outputs=[OutputTag("raw")])
    assert CheckpointStorage(chk).completed_ids() == []


def test_side_outputs_on_s3_read_through_the_data_source(spark: Any, s3_options: dict[str, Any]) -> None:
    root, options = f"s3://{s3_options['bucket']}/jobs/ms", s3_options["options"]
    tags = [LONG_WORDS, MILESTONES]
    df = _words(spark, FIRST)
    out = process(
        df, "word", Milestones(), WC, root, "ms", parallelism=2, side_outputs=tags, storage_options=options
    )
    main, side = _expected(FIRST)
    assert _rows(out) == main
    for tag in tags:
        got = read_side_output(spark, root, "ms", tag, storage_options=options)
        assert _rows(got) == side[tag.tag_id]
