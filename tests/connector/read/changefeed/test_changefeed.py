"""The change feed: the changes of a range of checkpoints, applied in order to the state
before the range, give the state at its end; ranges that cannot be answered are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from checkpoint_data import LIST, MAP, VALUE

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.connector.errors import OptionError
from flinkstate.connector.options import ReadOptions
from flinkstate.connector.read.changefeed.reader import ChangeFeedReader, change_feed_schema, open_range
from flinkstate.state import HeapKeyedStateBackend, KeyGroupRange, Types

ROUNDS = 6


def _job(root: Path, seed: int = 3, full: Path | None = None) -> CheckpointStorage:
    """Two subtasks, six checkpoints (the first full, a compaction among them); with
    ``full``, a full checkpoint of each moment there too."""
    import random

    rng = random.Random(seed)
    storage = CheckpointStorage(str(root), retain=10, incremental=True, max_chain_files=3,
                                max_chain_bytes_ratio=100.0)  # fmt: skip
    backends = [
        HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=16, key_group_range=KeyGroupRange(0, 7)),
        HeapKeyedStateBackend(
            key_type=Types.LONG(), max_parallelism=16, key_group_range=KeyGroupRange(8, 15)
        ),
    ]
    from flinkstate.state import assign_to_key_group

    for _ in range(ROUNDS):
        for _ in range(150):
            key = rng.randrange(60)
            backend = backends[assign_to_key_group(key, 16) // 8]
            backend.set_current_key(key)
            op = rng.randrange(7)
            if op == 0:
                backend.get_state(VALUE).update(rng.randrange(1000))
            elif op == 1:
                backend.get_state(VALUE).clear()
            elif op == 2:
                backend.get_list_state(LIST).add(f"é{rng.randrange(5)}")
            elif op == 3:
                backend.get_list_state(LIST).clear()
            elif op == 4:
                backend.get_map_state(MAP).put(f"u{rng.randrange(4)}", rng.randrange(9))
            elif op == 5:
                backend.get_map_state(MAP).remove(f"u{rng.randrange(4)}")
            else:
                backend.get_partitioned_state(rng.randrange(2), VALUE).update(-1)
        pending = storage.begin()
        for i, backend in enumerate(backends):
            pending.write_keyed("op", backend, subtask=i, parallelism=2)
        if full is not None:
            same = CheckpointStorage(str(full), retain=10).begin(pending.checkpoint_id)
            for i, backend in enumerate(backends):
                same.write_keyed("op", backend, subtask=i, parallelism=2)
            same.commit()
        pending.commit()
    return storage


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("feed") / "root"
    _job(path)
    return path


def _options(root: Path, state: str, **extra: str) -> ReadOptions:
    return ReadOptions.parse({"path": str(root), "operator": "op", "state": state, "readChangeFeed": "true",
                              **extra})  # fmt: skip


def _read(options: ReadOptions) -> list[dict[str, Any]]:
    checkpoints = open_range(options)
    schema = change_feed_schema(checkpoints[-1].operator("op"), options.state or "", options.flatten)
    reader = ChangeFeedReader(options, checkpoints, schema)
    batches = [b for p in reader.partitions() for b in reader.read(p)]
    return pa.Table.from_batches(batches, schema).to_pylist() if batches else []


def _state(root: Path, checkpoint_id: int, state: str) -> dict[Any, Any]:
    """(key, namespace[, user key]) -> value, or (key, namespace) -> list, at a checkpoint."""
    out: dict[Any, Any] = {}
    checkpoint = CheckpointStorage(str(root)).load(checkpoint_id)
    backend = checkpoint.keyed_backend("op", 0, 1)
    with backend.snapshot() as snap:
        for kg in snap.key_group_range:
            for e in snap.states[state].entries(kg):
                if state == "map":
                    out |= {(e.key, e.namespace, k): v for k, v in e.value.items()}
                else:
                    out[(e.key, e.namespace)] = list(e.value) if state == "list" else e.value
    return out


def _apply(state: str, before: dict[Any, Any], rows: list[dict[str, Any]]) -> dict[Any, Any]:
    after = dict(before)
    rows = sorted(
        rows, key=lambda r: (r["checkpoint_id"], r["change_type"] == "update", r.get("position") or 0)
    )
    for row in rows:
        scope = (row["key"], row["namespace"])
        if row["change_type"] == "delete":
            for k in [k for k in after if k[:2] == scope]:
                del after[k]
        elif state == "map":
            after[(*scope, row["user_key"])] = row["value"]
        elif state == "list":
            after.setdefault(scope, []).append(row["value"])
        else:
            after[scope] = row["value"]
    return after


@pytest.mark.parametrize("state", ["value", "list", "map"])
@pytest.mark.parametrize(("start", "end"), [(2, 6), (3, 4), (5, 5), (4, None)])
def test_changes_applied_to_the_start_give_the_end(
    root: Path, state: str, start: int, end: int | None
) -> None:
    extra = {"changeStartCheckpointId": str(start)} | (
        {} if end is None else {"changeEndCheckpointId": str(end)}
    )
    rows = _read(_options(root, state, **extra))
    assert {r["checkpoint_id"] for r in rows} <= set(range(start, (end or ROUNDS) + 1))
    assert _apply(state, _state(root, start - 1, state), rows) == _state(root, end or ROUNDS, state)


def test_key_selection_applies(root: Path) -> None:
    every = _read(_options(root, "value", changeStartCheckpointId="2"))
    some = _read(_options(root, "value", changeStartCheckpointId="2", keys="[1, 2, 3]"))
    assert some == [r for r in every if r["key"] in (1, 2, 3)] and some


def test_unanswerable_ranges_are_refused(root: Path, tmp_path: Path) -> None:
    with pytest.raises(OptionError, match=r"\[CHANGE_FEED_UNAVAILABLE\].*after 1"):
        _read(_options(root, "value", changeStartCheckpointId="1"))  # the first checkpoint is full
    with pytest.raises(OptionError, match=r"\[CHANGE_FEED_UNAVAILABLE\].*retained checkpoints are 1\.\.6"):
        _read(_options(root, "value", changeStartCheckpointId="3", changeEndCheckpointId="9"))
    with pytest.raises(OptionError, match=r"\[CHANGE_FEED_UNAVAILABLE\].*checkpoints 9\.\.6"):
        _read(_options(root, "value", changeStartCheckpointId="9"))  # after the latest
    kept = CheckpointStorage(str(tmp_path / "short"), retain=2)
    _job(tmp_path / "short")
    kept.cleanup()
    with pytest.raises(OptionError, match=r"\[CHANGE_FEED_UNAVAILABLE\].*retained checkpoints are 5\.\.6"):
        _read(_options(tmp_path / "short", "value", changeStartCheckpointId="3"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"changeStartCheckpointId": "0"}, "at least 1"),
        ({"changeStartCheckpointId": "x"}, "must be an integer"),
        ({}, "needs changeStartCheckpointId"),
        ({"changeStartCheckpointId": "4", "changeEndCheckpointId": "3"}, "before changeStartCheckpointId"),
        ({"changeStartCheckpointId": "2", "checkpointId": "3"}, "checkpointId selects one checkpoint"),
        ({"readChangeFeed": "maybe"}, "true or false"),
    ],
)
def test_bad_options(root: Path, extra: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=r"\[INVALID_OPTION\].*" + message):
        _options(root, "value", **extra)
    with pytest.raises(OptionError, match=r"\[INVALID_OPTION\].*need readChangeFeed=true"):
        ReadOptions.parse(
            {"path": str(root), "operator": "op", "state": "value", "changeStartCheckpointId": "2"}
        )


@pytest.mark.connect
def test_through_spark(spark: Any, root: Path) -> None:
    df = (
        spark.read.format("flinkstate")
        .option("operator", "op")
        .option("state", "value")
        .option("readChangeFeed", "true")
        .option("changeStartCheckpointId", "2")
        .load(str(root))
    )
    assert df.columns == ["key_group", "key", "namespace", "value", "checkpoint_id", "change_type"]
    rows = [r.asDict() for r in df.collect()]
    assert sorted(rows, key=repr) == sorted(
        _read(_options(root, "value", changeStartCheckpointId="2")), key=repr
    )
    assert {r["change_type"] for r in rows} == {"update", "delete"}
    chain = spark.read.format("flinkstate").option("operator", "op").option("state", "value").load(str(root))
    assert {(r.key, r.namespace): r.value for r in chain.collect()} == _state(root, ROUNDS, "value")


def _spark_rows(spark: Any, root: Path, state: str, checkpoint: int) -> list[str]:
    """Every row of ``state`` in ``checkpoint``, read through Spark, as sorted text."""
    frame = (
        spark.read.format("flinkstate").option("operator", "op").option("state", state)
        .option("checkpointId", str(checkpoint)).load(str(root))
    )  # fmt: skip
    return sorted(repr(sorted(r.asDict().items())) for r in frame.collect())


def test_every_checkpoint_of_a_chain_reads_through_spark_like_a_full_one(spark: Any, tmp_path: Path) -> None:
    """A chain's every checkpoint, read by Spark, gives the rows of a full checkpoint of the
    same moment (list and map states flattened: one row per element or entry)."""
    _job(tmp_path / "chain", seed=5, full=tmp_path / "full")
    assert CheckpointStorage(str(tmp_path / "full")).completed_ids() == list(range(1, ROUNDS + 1))
    for state in ("value", "list", "map"):
        for checkpoint in range(1, ROUNDS + 1):
            chain = _spark_rows(spark, tmp_path / "chain", state, checkpoint)
            assert chain == _spark_rows(spark, tmp_path / "full", state, checkpoint), (state, checkpoint)
            assert chain


def test_metadata_view_shows_file_origins(root: Path) -> None:
    from flinkstate.checkpoint.views.metadata import metadata_table

    storage = CheckpointStorage(str(root))
    first = {r["state"]: r for r in metadata_table(storage.load(1).manifest, 1).to_pylist()}
    second = {r["state"]: r for r in metadata_table(storage.load(2).manifest, 2).to_pylist()}
    assert first["value"]["checkpoint_type"] == "full" and first["value"]["file_checkpoints"] == [1]
    assert first["value"]["delta_files"] == 0 and first["value"]["files"] == 2  # one per subtask
    assert second["value"]["checkpoint_type"] == "incremental"
    assert second["value"]["file_checkpoints"] == [1, 2] and second["value"]["delta_files"] == 2
