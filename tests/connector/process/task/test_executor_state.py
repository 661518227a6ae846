"""Live state kept by the executor, not the Python worker (without a SparkSession: each
"executor" is a ``SPARK_LOCAL_DIRS`` of its own, each "Python worker" a process whose
in-process state is forgotten): a native RocksDB subtask's DB reopens in any worker of
its executor, a restore reads the executor's cached files, a restored subtask writes an
increment, a bad cached copy is never trusted, and nothing lands under ``$TMPDIR``."""

from __future__ import annotations

import os
import pickle
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.connector.process.names import ROUTE, SEQ
from flinkstate.connector.process.output import OutputSchema
from flinkstate.connector.process.routing import route_values
from flinkstate.connector.process.task.live import _KEPT, _discard
from flinkstate.connector.process.task.plan import TaskPlan
from flinkstate.connector.process.task.subtask import run_subtask
from flinkstate.state.factory import backend_options
from flinkstate.state.ttl.time import LONG_MIN

from process_functions import Failing, WordCount, stored_counts

UID = "wc"


def _schema() -> OutputSchema:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return OutputSchema.of(StructType([StructField("word", StringType()), StructField("count", LongType())]))


class Job:
    """Runs of one subtask (parallelism 1) under ``root``, as the driver would plan them."""

    def __init__(self, root: Path, backend: str, cache_bytes: int = 1 << 30) -> None:
        self.root = root
        self.backend = backend_options(backend)
        self.cache_bytes = cache_bytes
        self.base: CompletedCheckpoint | None = None
        self.token: str | None = None
        self.model: Counter[str] = Counter()
        self.runs = 0

    def run(self, words: list[str], function: Any = None, commit: bool = True) -> dict[str, Any]:
        fmt = "native" if self.backend.kind == "rocksdb" else "parquet"
        storage = CheckpointStorage(str(self.root), incremental=True, rocksdb_format=fmt)
        pending = storage.begin()
        self.runs += 1
        base = self.base
        plan = TaskPlan(
            UID, function or WordCount(), self.backend, ("word",), _types(), ("word",), None, 1, 128,
            pending.target, storage.storage.url, None if base is None else base.manifest,
            None if base is None else base.directory, self.token, f"run{self.runs}", LONG_MIN, LONG_MIN, 0,
            False, (), _schema(), {}, executor_bytes=self.cache_bytes,
        )  # fmt: skip
        batch = pa.RecordBatch.from_pydict(
            {"word": words, SEQ: list(range(len(words))), ROUTE: [route_values(1)[0]] * len(words)},
            schema=pa.schema([("word", pa.string()), (SEQ, pa.int64()), (ROUTE, pa.int32())]),
        )
        (out,) = list(run_subtask(plan, iter([batch])))
        results, stats = pickle.loads(out.column(0)[0].as_py())
        if commit:
            for r in results:
                pending.add(r)
            self.base, self.token = pending.commit(), stats["attempt"]
            self.model.update(words)
        else:
            pending.abort()
        return dict(stats)

    def written_after(self, checkpoint_id: int) -> int:
        """Bytes of the latest checkpoint's files (state and output) written by checkpoints
        after ``checkpoint_id``."""
        assert self.base is not None
        return sum(
            f.size
            for op in self.base.manifest.operators
            for st in op.subtasks
            for f in st.files()
            if (f.checkpoint_id or self.base.checkpoint_id) > checkpoint_id
        )

    def own_rows(self) -> int:
        """Rows of the latest checkpoint's own files of state ``count`` (Parquet)."""
        assert self.base is not None
        files = self.base.manifest.operator(UID).subtasks[0].keyed["count"]
        return sum(f.rows for f in files if f.checkpoint_id == self.base.checkpoint_id)


def forget_worker() -> None:
    """This Python worker is gone: what it kept goes with it."""
    while _KEPT:
        _discard(_KEPT.popitem()[1])


def _types() -> Any:
    from flinkstate.state import Types

    return Types.STRING()


@pytest.fixture
def executors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Switch between two executors' local directories; ``$TMPDIR`` is watched."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)

    def on(name: str) -> Path:
        local = tmp_path / f"executor-{name}"
        local.mkdir(exist_ok=True)
        monkeypatch.setenv("SPARK_LOCAL_DIRS", str(local))
        forget_worker()  # another Python worker: nothing in-process carries over
        return local

    yield on, tmp
    forget_worker()


WORDS = [f"w{i}" for i in range(3000)] + ["ü", "日本"]


def test_rocksdb_reopens_in_another_worker_of_its_executor(tmp_path: Path, executors: Any) -> None:
    on, tmp = executors
    job = Job(tmp_path / "root", "rocksdb")
    local = on("a")
    assert job.run(WORDS)["start"] == "new"
    for words in (["w1", "ü"], ["w2", "new"]):
        on("a")  # a new Python worker on the same executor, as after Spark's 60 s idle kill
        stats = job.run(words)
        assert (stats["start"], stats["reused"], stats["downloaded"]) == ("warm", 1, 0)
        assert stored_counts(job.root) == dict(job.model)
    assert list(tmp.iterdir()) == []  # nothing under $TMPDIR
    assert len(list((local / "flinkstate" / "live").iterdir())) == 1


def test_a_slot_of_an_attempt_that_did_not_commit_is_discarded(tmp_path: Path, executors: Any) -> None:
    on, _ = executors
    job = Job(tmp_path / "root", "rocksdb")
    on("a")
    job.run(WORDS)
    on("a")
    job.run(["w1", "w1"], commit=False)  # its DB is kept, but its checkpoint never commits
    on("a")
    stats = job.run(["w2"])
    assert stats["start"] == "cached" and stats["downloaded"] == 0
    assert stored_counts(job.root) == dict(job.model)
    on("a")
    with pytest.raises(Exception, match="boom"):
        job.run(["boom"], function=Failing())
    on("a")
    assert job.run(["w3"])["start"] == "cached"
    assert stored_counts(job.root) == dict(job.model)


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_a_moved_subtask_downloads_only_what_it_lacks(tmp_path: Path, executors: Any, backend: str) -> None:
    on, _ = executors
    job = Job(tmp_path / "root", backend)
    on("a")
    job.run(WORDS)
    assert job.base is not None
    left = job.base.checkpoint_id
    on("b")  # the subtask moves to an executor that never held it: everything is downloaded
    cold = job.run(["w1"])
    assert cold["start"] == "cold" and cold["downloaded"] > 0
    for words in (["w2"], ["w3", "w4"]):
        on("b")
        job.run(words)
    since = job.written_after(left)
    on("a")  # back on the first executor: only what b wrote since is downloaded
    back = job.run(["w5"])
    assert back["start"] == "cached" and 0 < back["downloaded"] <= since < cold["downloaded"]
    assert stored_counts(job.root) == dict(job.model)


def test_a_restored_heap_subtask_writes_an_increment(tmp_path: Path, executors: Any) -> None:
    on, _ = executors
    job = Job(tmp_path / "root", "heap")
    on("a")
    job.run(WORDS)
    full = job.own_rows()
    for words in (["w1", "w2", "w1"], ["x"], ["w1"]):
        on("a")  # the kept heap backend is gone with its Python worker
        stats = job.run(words)
        assert stats["start"] == "cached" and stats["downloaded"] == 0
        assert job.base is not None and job.base.manifest.incremental
        assert job.own_rows() == len(set(words)) and job.own_rows() <= full / 100
        assert stored_counts(job.root) == dict(job.model)


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_a_damaged_cached_copy_is_never_trusted(tmp_path: Path, executors: Any, backend: str) -> None:
    on, _ = executors
    job = Job(tmp_path / "root", backend)
    local = on("a")
    job.run(WORDS)
    if backend == "rocksdb":  # no kept DB: the restore reads the cached files
        for slot in (local / "flinkstate" / "live").iterdir():
            (slot / "HOLDS").unlink()
    cache = local / "flinkstate" / "cache"
    copies = [p for p in cache.iterdir() if p.is_file() and p.stat().st_size]
    assert copies
    for copy in copies:  # same size, other bytes: only the checks can tell
        data = bytearray(copy.read_bytes())
        data[len(data) // 2] ^= 0xFF
        copy.write_bytes(bytes(data))
    on("a")
    stats = job.run(["w1"])
    assert stats["start"] == "cold" and stats["downloaded"] > 0
    assert stored_counts(job.root) == dict(job.model)


def test_the_executor_directory_is_bounded(tmp_path: Path, executors: Any) -> None:
    on, _ = executors
    local = on("a")
    jobs = [Job(tmp_path / f"root{i}", "rocksdb", cache_bytes=400_000) for i in range(3)]
    for job in jobs:
        on("a")
        job.run(WORDS)
    held = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(local / "flinkstate") for f in fs)
    assert held <= 400_000 + 64_000  # the bound, plus the slot just kept and the lock files
    for job in jobs:  # whatever was evicted, every run still continues exactly
        on("a")
        job.run(["w1"])
        assert stored_counts(job.root) == dict(job.model)


def test_no_store_outside_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    forget_worker()
    job = Job(tmp_path / "root", "rocksdb")
    job.run(WORDS)
    assert job.run(["w2"])["start"] == "warm"  # kept by this Python worker, as before
    forget_worker()
    stats = job.run(["w1"])
    assert stats["start"] == "cold" and stats["downloaded"] > 0
    assert stored_counts(job.root) == dict(job.model)
    forget_worker()


def test_a_kept_db_that_does_not_open_is_restored(tmp_path: Path, executors: Any) -> None:
    on, _ = executors
    job = Job(tmp_path / "root", "rocksdb")
    local = on("a")
    job.run(WORDS)
    (slot,) = (local / "flinkstate" / "live").iterdir()
    for sst in (slot / "db").glob("*.sst"):
        sst.unlink()  # what a full disk or an operator's clean-up may leave
    on("a")
    stats = job.run(["w1"])
    assert stats["start"] == "cached"
    assert stored_counts(job.root) == dict(job.model)


def test_a_worker_drops_what_other_workers_ran_since(tmp_path: Path, executors: Any) -> None:
    """Subtask 1 was kept here, then ran elsewhere: at this worker's next task of the job,
    its stale backend is dropped (not held beside the live one until evicted)."""
    on, _ = executors
    on("a")
    job, other = Job(tmp_path / "root", "heap"), Job(tmp_path / "other", "heap")
    job.run(WORDS)
    other.run(["x"])
    url = {name: CheckpointStorage(str(j.root)).storage.url for name, j in (("job", job), ("other", other))}
    stale = _KEPT.pop((url["other"], UID, 0))
    _KEPT[(url["job"], UID, 1)] = stale  # as if this worker had run subtask 1 of the job before
    assert job.run(["w1"])["start"] == "warm"
    assert [k[2] for k in _KEPT if k[0] == url["job"]] == [0]
    assert stale.operator.backend.is_closed
