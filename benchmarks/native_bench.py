"""P16: native RocksDB checkpoints (SST files) against Parquet ones, one ValueState
(LONG → LONG) in two RocksDB subtasks, 10M entries (1M under ``--quick``; ``P16_SIZE``
overrides both, for a smoke run).

Each round changes 1% of the keys, then takes three checkpoints of that same state: an
incremental native one (into the root that holds the earlier rounds' checkpoints: only
SST files it does not hold yet are uploaded), a full native one and a full Parquet one
(each into an empty root). The full native checkpoint hashes every SST file, as a job's
first checkpoint does (the backend remembers the SHA-256 of files it hashed; that memory
is left out of it, so it is the cold cost). Only the first of the three flushes the
memtable holding the round's changes: the full ones' times leave that flush out, which
makes the incremental's ratio conservative. Then the last round's full checkpoints are
restored, at the same parallelism (2 subtasks) and after a rescale (2 → 3), into fresh
RocksDB backends, in pairs. Every ratio pairs figures of one round; medians over rounds.
No round is a warm-up for either side: the native base the increments build on is
taken before the first round and not measured.
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.state import (
    RocksDBKeyedStateBackend,
    Types,
    ValueStateDescriptor,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.keygroups.hashing import key_group_assigner
from flinkstate.state.rocksdb.native import NativeSnapshot

from common import Result, paired

DESC = ValueStateDescriptor("v", Types.LONG())
MAX_P = 128
UID = "op"


def _size(quick: bool) -> int:
    override = os.environ.get("P16_SIZE")
    if override:
        return int(override)
    return 1_000_000 if quick else 10_000_000


class _Job:
    """Two RocksDB subtasks of one operator (key groups split 0-63 / 64-127) under ``work``."""

    def __init__(self, work: str, n: int) -> None:
        self.work = work
        ranges = [compute_key_group_range_for_operator_index(MAX_P, 2, i) for i in range(2)]
        self.subtasks = [self.backend(key_type=Types.LONG(), max_parallelism=MAX_P, key_group_range=r)
                         for r in ranges]  # fmt: skip
        self.assign = key_group_assigner(Types.LONG())
        self.update(range(n), 0)

    def backend(self, **kwargs: Any) -> RocksDBKeyedStateBackend:
        return RocksDBKeyedStateBackend(tempfile.mkdtemp(prefix="db-", dir=self.work), **kwargs)

    def update(self, keys: Any, offset: int) -> None:
        states = [b.get_state(DESC) for b in self.subtasks]
        half = MAX_P // 2
        with self.subtasks[0].write_batch(), self.subtasks[1].write_batch():
            for k in keys:
                i = self.assign(k, MAX_P) >= half
                self.subtasks[i].set_current_key(k)
                states[i].update(k + offset)

    def checkpoint(
        self, storage: CheckpointStorage, cold: bool = False
    ) -> tuple[float, int, CompletedCheckpoint]:
        """(seconds from begin to commit, bytes this checkpoint uploaded, the checkpoint);
        ``cold``: no SST file's SHA-256 is taken as known."""
        gc.collect()
        start = time.perf_counter()
        pending = storage.begin()
        for i, backend in enumerate(self.subtasks):
            snap = pending.snapshot(backend, UID, i, 2)
            if cold and isinstance(snap, NativeSnapshot):
                snap.digests = {}
            pending.write_snapshot(UID, snap, i, 2)
        done = pending.commit()
        elapsed = time.perf_counter() - start
        written = sum(f.size for f in done.manifest.files() if f.checkpoint_id == done.checkpoint_id)
        return elapsed, written, done

    def restore(self, checkpoint: CompletedCheckpoint, parallelism: int) -> float:
        """Seconds restoring every subtask of ``parallelism`` into a fresh RocksDB backend."""
        gc.collect()
        backends = []
        start = time.perf_counter()
        for i in range(parallelism):
            backends.append(checkpoint.keyed_backend(UID, i, parallelism, backend_factory=self.backend))
        elapsed = time.perf_counter() - start
        for b in backends:
            b.close()
            shutil.rmtree(b.path, ignore_errors=True)
        return elapsed

    def close(self) -> None:
        for b in self.subtasks:
            b.close()


def p16(quick: bool) -> Iterator[Result]:
    n = _size(quick)
    rounds = 3
    rng = random.Random(16)
    work = tempfile.mkdtemp(prefix="p16-")
    job = None
    try:
        job = _Job(work, n)
        series = CheckpointStorage(f"{work}/series", retain=1, rocksdb_format="native")
        job.checkpoint(series)  # the base the increments build on
        increments, fulls = [], []
        native = parquet = None
        for r in range(rounds):
            job.update(rng.sample(range(n), n // 100), r + 1)
            increments.append(job.checkpoint(series)[:2])
            for old in ("native", "parquet"):
                shutil.rmtree(f"{work}/{old}", ignore_errors=True)
            t_native, b_native, native = job.checkpoint(
                CheckpointStorage(f"{work}/native", rocksdb_format="native"), cold=True
            )
            t_parquet, _, parquet = job.checkpoint(CheckpointStorage(f"{work}/parquet"))
            fulls.append(((t_native, b_native), t_parquet))
        job.close()
        assert native is not None and parquet is not None
        restores = [(job.restore(native, 2), job.restore(parquet, 2)) for _ in range(rounds)]
        rescales = [(job.restore(native, 3), job.restore(parquet, 3)) for _ in range(rounds)]
    finally:
        if job is not None:
            job.close()
        shutil.rmtree(work, ignore_errors=True)
    what = f"RocksDB, 2 subtasks, {n:,} ValueState entries"
    ours, anchor, ratio = paired([(nat[0], par) for nat, par in fulls])
    yield Result("P16", f"full native checkpoint ({what})", ours * 1e3, "ms",
                 "full Parquet checkpoint of the same state", anchor * 1e3, 1 / ratio,
                 ">= 10x faster (ratio >= 10)", 1 / ratio >= 10)  # fmt: skip
    for index, (label, unit, scale) in enumerate((("time", "ms", 1e3), ("bytes uploaded", "bytes", 1))):
        ours, anchor, ratio = paired([(inc[index] * scale, nat[index] * scale)
                                      for inc, (nat, _) in zip(increments, fulls, strict=True)])  # fmt: skip
        yield Result("P16", f"incremental native checkpoint, 1% of the keys changed, {label} ({what})", ours,
                     unit, f"full native checkpoint of the same state, {label}", anchor, 1 / ratio,
                     "<= 0.05x (ratio >= 20)", ratio <= 0.05)  # fmt: skip
    for pairs, label, goal in (
        (restores, "restore at the same parallelism (2 subtasks)", 10.0),
        (rescales, "rescale-restore 2 → 3 (3 subtasks)", 3.0),
    ):
        ours, anchor, ratio = paired(pairs)
        yield Result("P16", f"{label} of a native checkpoint ({what})", ours * 1e3, "ms",
                     "the same from a Parquet checkpoint of the same state", anchor * 1e3, 1 / ratio,
                     f">= {goal:g}x faster (ratio >= {goal:g})", 1 / ratio >= goal)  # fmt: skip


BENCHMARKS = {"P16": p16}
