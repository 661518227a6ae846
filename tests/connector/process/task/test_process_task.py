"""The executor side of the runner without a SparkSession: a task's live backend is kept
for exactly the checkpoint its run wrote, and a failed attempt never leaves one behind."""

from __future__ import annotations

import pickle
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flinkstate.checkpoint import CheckpointStorage, SubtaskResult
from flinkstate.connector import ProcessError
from flinkstate.connector.process.names import OUTPUT_STATE, ROUTE, SEQ, output_uid
from flinkstate.connector.process.output import OutputSchema
from flinkstate.connector.process.routing import route_values
from flinkstate.connector.process.task.live import _KEPT, forget_kept
from flinkstate.connector.process.task.plan import TaskPlan
from flinkstate.connector.process.task.subtask import run_subtask
from flinkstate.state import ProcessFunctionError, Types, ValueStateDescriptor
from flinkstate.state.factory import BackendOptions, backend_options
from flinkstate.state.ttl.time import LONG_MIN

from process_functions import Failing, TimerCount, WordCount, rocksdb_write_buffer, stored_counts


def _schema() -> OutputSchema:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return OutputSchema.of(StructType([StructField("word", StringType()), StructField("count", LongType())]))


def _plan(
    root: Path,
    function: Any,
    token: str,
    base: Any = None,
    base_token: str | None = None,
    incremental: bool = True,
    *,
    timed: tuple[int, int, int] | None = None,
    schema: OutputSchema | None = None,
    job_parameters: dict[str, str] | None = None,
    backend: BackendOptions | None = None,
) -> tuple[Any, Any]:
    """A plan over words, or with ``timed`` = (watermark_delay, watermark, end watermark)
    over rows (word, ts) with event time ``ts``."""
    storage = CheckpointStorage(str(root), incremental=incremental)
    pending = storage.begin()
    delay, watermark, end = timed or (0, LONG_MIN, LONG_MIN)
    plan = TaskPlan(
        "wc",
        function,
        backend or backend_options("heap"),
        ("word",),
        Types.STRING(),
        ("word", "ts") if timed else ("word",),
        "ts" if timed else None,
        1,
        128,
        pending.target,
        storage.storage.url,
        None if base is None else base.manifest,
        None if base is None else base.directory,
        base_token,
        token,
        watermark,
        end,
        delay,
        False,
        (),
        schema or _schema(),
        job_parameters or {},
    )
    return plan, pending


def _batch(words: list[str], route: int | None = None) -> pa.RecordBatch:
    r = route_values(1)[0] if route is None else route
    return pa.RecordBatch.from_pydict(
        {"word": words, SEQ: list(range(len(words))), ROUTE: [r] * len(words)},
        schema=pa.schema([("word", pa.string()), (SEQ, pa.int64()), (ROUTE, pa.int32())]),
    )


def _run(plan: Any, words: list[str]) -> tuple[list[SubtaskResult], dict[str, int]]:
    (out,) = list(run_subtask(plan, iter([_batch(words)])))
    results, stats = pickle.loads(out.column(0)[0].as_py())
    return results, stats


def _commit(pending: Any, results: list[SubtaskResult]) -> Any:
    for r in results:
        pending.add(r)
    return pending.commit()


def test_kept_backend_only_for_the_checkpoint_it_wrote(tmp_path: Path) -> None:
    forget_kept()
    plan, pending = _plan(tmp_path, WordCount(), "t1")
    results, stats = _run(plan, ["a", "b", "a"])
    assert {k: stats[k] for k in ("rows", "output", "reused")} == {"rows": 3, "output": 3, "reused": 0}
    first = _commit(pending, results)
    plan, pending = _plan(tmp_path, WordCount(), "t2", first, stats["attempt"])
    results, stats = _run(plan, ["a"])
    assert stats["reused"] == 1
    second = _commit(pending, results)
    # an attempt that fails drops what it held: the retry restores from the checkpoint
    plan, pending = _plan(tmp_path, Failing(), "t3", second, stats["attempt"])
    with pytest.raises(ProcessFunctionError, match="'boom'"):
        _run(plan, ["a", "boom"])
    assert not _KEPT
    plan, pending = _plan(tmp_path, WordCount(), "t3", second, stats["attempt"])
    results, stats = _run(plan, ["a"])
    assert stats["reused"] == 0
    backend = second.keyed_backend("wc", 0, 1)
    assert sorted(backend.get_keys("count")) == ["a", "b"]
    # an attempt whose results were not the ones committed (another attempt's were) is never reused
    plan, _ = _plan(tmp_path, WordCount(), "t4", second, "t3.0.elsewhere")
    assert _run(plan, ["a"])[1]["reused"] == 0
    forget_kept()


class Named(WordCount):
    """Word count that records what its runtime context says in ``open``."""

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self.said = (
            runtime_context.get_task_name_with_subtasks(),
            runtime_context.get_job_parameter("env", "dev"),
        )


def test_runtime_context_of_a_task_names_the_uid_and_each_runs_parameters(tmp_path: Path) -> None:
    forget_kept()
    first = Named()
    plan, pending = _plan(tmp_path, first, "t1", job_parameters={"env": "prod"})
    results, stats = _run(plan, ["a"])
    assert first.said == ("wc (1/1)#0", "prod")
    second = Named()  # a kept backend's next run takes that run's parameters
    plan, _ = _plan(tmp_path, second, "t2", _commit(pending, results), stats["attempt"])
    assert _run(plan, ["a"])[1]["reused"] == 1
    assert second.said == ("wc (1/1)#0", "dev")
    forget_kept()


def _counts(checkpoint: Any) -> dict[str, int]:
    backend = checkpoint.keyed_backend("wc", 0, 1)
    state = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
    out: dict[str, int] = {}
    for key in backend.get_keys("count"):
        backend.set_current_key(key)
        out[key] = state.value()
    return out


@pytest.mark.parametrize("incremental", [True, False])
def test_a_kept_backend_checkpoints_what_changed(tmp_path: Path, incremental: bool) -> None:
    forget_kept()
    words = [f"w{i}" for i in range(200)]
    runs = [words, ["w1", "ü"], ["w2"], ["w1", "w3"]]
    model: Counter[str] = Counter()
    base, token = None, None
    for i, run in enumerate(runs):
        plan, pending = _plan(tmp_path, WordCount(), f"t{i}", base, token, incremental)
        results, stats = _run(plan, run)
        base, token = _commit(pending, results), stats["attempt"]
        model.update(run)
        assert stats["reused"] == (i > 0)
        assert base.manifest.incremental == (incremental and i > 0)
        files = base.manifest.operator("wc").subtasks[0].keyed["count"]
        own = [f for f in files if f.checkpoint_id == base.checkpoint_id]
        assert sum(f.rows for f in own) == (len(set(run)) if incremental and i > 0 else len(model))
        assert _counts(base) == dict(model)
    # a worker that lost its backend restores the chain and writes an increment over it
    forget_kept()
    plan, pending = _plan(tmp_path, WordCount(), "again", base, token, incremental)
    results, stats = _run(plan, ["w5"])
    after = _commit(pending, results)
    model.update(["w5"])
    assert stats["reused"] == 0 and stats["start"] == "cold" and stats["downloaded"] > 0
    assert after.manifest.incremental == incremental and _counts(after) == dict(model)
    files = after.manifest.operator("wc").subtasks[0].keyed["count"]
    own = [f for f in files if f.checkpoint_id == after.checkpoint_id]
    assert sum(f.rows for f in own) == (1 if incremental else len(model))
    forget_kept()


def test_rows_of_another_range_are_refused(tmp_path: Path) -> None:
    plan, _ = _plan(tmp_path, WordCount(), "t1")
    with pytest.raises(ProcessError, match="ROUTING_FAILED"):
        list(run_subtask(plan, iter([_batch(["a"], route=route_values(1)[0] + 1)])))


def _timed_batch(rows: list[tuple[str, int]]) -> pa.RecordBatch:
    words, stamps = zip(*rows, strict=True)
    schema = pa.schema([("word", pa.string()), ("ts", pa.int64()), (SEQ, pa.int64()), (ROUTE, pa.int32())])
    return pa.RecordBatch.from_pydict(
        {
            "word": list(words),
            "ts": list(stamps),
            SEQ: list(range(len(rows))),
            ROUTE: [route_values(1)[0]] * len(rows),
        },
        schema=schema,
    )


def _timer_output(checkpoint: Any) -> list[tuple[Any, ...]]:
    (states,) = checkpoint.operator_states(output_uid("wc"))
    (output,) = [s for s in states if s.name == OUTPUT_STATE]
    return sorted(tuple(r) for r in output.elements)


def _timed_run(
    root: Path, rows: list[tuple[str, int]], delay: int, watermark: int, base: Any, token: Any
) -> Any:
    end = max(watermark, max(ts for _, ts in rows) - delay - 1)  # as the driver computes it
    schema = OutputSchema.of(_timer_struct())
    plan, pending = _plan(
        root, TimerCount(), f"t{delay}", base, token, timed=(delay, watermark, end), schema=schema
    )
    (out,) = list(run_subtask(plan, iter([_timed_batch(rows)])))
    results, stats = pickle.loads(out.column(0)[0].as_py())
    return _commit(pending, results), stats, end


def _timer_struct() -> Any:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType(
        [StructField(n, t) for n, t in (("word", StringType()), ("t", LongType()), ("n", LongType()))]
    )


def test_a_kept_backend_runs_with_the_settings_of_each_run(tmp_path: Path) -> None:
    """Run 2 changes watermark_delay: a reused backend must give what a restored one and a
    fresh root give (with run 1's delay kept, the timer at 2000 fires late, counting 2)."""
    forget_kept()
    run2 = [("a", 2000), ("a", 2500)]
    first, stats, end = _timed_run(tmp_path / "kept", [("z", 0)], 1000, LONG_MIN, None, None)
    assert _timer_output(first) == []
    reused, reused_stats, _ = _timed_run(tmp_path / "kept", run2, 0, end, first, stats["attempt"])
    assert reused_stats["reused"] == 1
    forget_kept()
    restored, restored_stats, _ = _timed_run(tmp_path / "kept", run2, 0, end, first, stats["attempt"])
    assert restored_stats["reused"] == 0
    fresh, _, _ = _timed_run(tmp_path / "fresh", run2, 0, LONG_MIN, None, None)
    assert _timer_output(fresh) == [("a", 2000, 1)]
    assert _timer_output(reused) == _timer_output(restored) == [("a", 2000, 1), ("z", 0, 1)]
    forget_kept()


def test_the_backend_by_name_comes_from_state_alone(tmp_path: Path) -> None:
    """The runner's tasks build backends with ``make_keyed_backend``; a bad name is the same
    ``[INVALID_OPTION]`` error there as in ``state`` (and in ``process``'s options)."""
    import shutil

    from flinkstate.state import HeapKeyedStateBackend, RocksDBKeyedStateBackend, make_keyed_backend
    from flinkstate.state.errors import InvalidArgumentError

    assert isinstance(backend_options("heap").make(max_parallelism=8), HeapKeyedStateBackend)
    rocks = backend_options("rocksdb").make(path=tmp_path / "db", max_parallelism=8)
    assert isinstance(rocks, RocksDBKeyedStateBackend) and rocks.max_parallelism == 8
    rocks.close()
    shutil.rmtree(tmp_path / "db")
    messages = []
    for make in (backend_options, make_keyed_backend):
        with pytest.raises(InvalidArgumentError, match=r"^\[INVALID_OPTION\] backend must be one of") as info:
            make("disk")
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_a_kept_backend_is_reused_only_with_the_same_rocksdb_options(tmp_path: Path) -> None:
    """A task builds its RocksDB backend with the run's options (as RocksDB's own OPTIONS
    file says); the next run reuses it only when its options are equal, else restores."""
    from flinkstate.connector.process.task.live import _discard

    forget_kept()
    small, large = (backend_options("rocksdb", {"write_buffer_bytes": n}) for n in (4 << 20, 8 << 20))

    def kept_write_buffer() -> int:
        (kept,) = _KEPT.values()
        assert kept.directory is not None
        return rocksdb_write_buffer(kept.directory)

    plan, pending = _plan(tmp_path, WordCount(), "t1", backend=small)
    results, stats = _run(plan, ["a", "b"])
    assert stats["reused"] == 0 and kept_write_buffer() == 4 << 20
    first = _commit(pending, results)
    same = backend_options("rocksdb", {"write_buffer_bytes": str(4 << 20)})  # equal, given as a string
    plan, pending = _plan(tmp_path, WordCount(), "t2", first, stats["attempt"], backend=same)
    results, stats = _run(plan, ["a"])
    assert stats["reused"] == 1
    second = _commit(pending, results)
    plan, pending = _plan(tmp_path, WordCount(), "t3", second, stats["attempt"], backend=large)
    results, stats = _run(plan, ["a"])
    assert stats["reused"] == 0 and kept_write_buffer() == 8 << 20
    _commit(pending, results)
    assert stored_counts(tmp_path) == {"a": 3, "b": 1}  # restored, not started afresh
    _discard(_KEPT.popitem()[1])
