"""P16: native RocksDB checkpoints (SST files) against Parquet ones, one ValueState
(LONG → LONG) in two RocksDB subtasks, 10M entries (1M under ``--quick``; ``P16_SIZE``
overrides both, for a smoke run).

Incremental checkpoints, per compaction style of :data:`STYLES`: after a native base
checkpoint (not measured), :data:`ROUNDS` rounds each change 1% of the keys and take an
incremental native checkpoint into the root holding the earlier rounds' (only SST files it
does not hold yet are uploaded). What an increment uploads depends on what RocksDB's
compaction rewrote since the last one, which comes in bursts, so the bytes are amortised:
all rounds' uploads over the rounds, against a full native checkpoint. Times are medians:
even rounds time the incremental checkpoint; odd rounds time RocksDB's own checkpoint of
the same change first (flush and hard links: the floor any by-file checkpoint pays, which
the increment then builds on untimed). Every :data:`PAIR_EVERY` rounds a full native
checkpoint into an empty root is the anchor, hashing every SST file as a job's first
checkpoint does (cold). It runs after the increment flushed the round's changes, which
makes the increments' ratios conservative.

Full checkpoints and restores (default options): three rounds each change 1% of the keys
and take a full native and a full Parquet checkpoint, each into an empty root; the last
ones are restored into fresh RocksDB backends, at the same parallelism (2 subtasks) and
after a rescale (2 → 3), in pairs. Every ratio pairs figures of one round; medians.
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.state import (
    RocksDBKeyedStateBackend,
    RocksDBOptions,
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
STYLES = {
    "level compaction (default options)": RocksDBOptions(),
    "universal compaction, trigger 12": RocksDBOptions(compaction_style="universal", compaction_trigger=12),
}
"""Compaction styles whose increments are measured: RocksDB's (and Flink's) default, and
the one that rewrites least per checkpoint (see :mod:`flinkstate.state.rocksdb.options`)."""
FLOOR_GOAL = "<= 2x the floor (ratio >= 0.5; re-based: the floor alone costs more than 0.05x)"
"""The increment's time goal against its floor: RocksDB's flush of the changed keys costs
about 0.6 µs per entry, while a full native checkpoint costs 20-30 ns per entry (hard
links, a hash and a copy of each file), so with 1% of the keys changed the flush alone is
0.2-0.4x of a full one. The increment adds describing, hashing and uploading the new files
and the manifest: at most as much again."""
ROUNDS = 40
PAIR_EVERY = 4


def _size(quick: bool) -> int:
    override = os.environ.get("P16_SIZE")
    if override:
        return int(override)
    return 1_000_000 if quick else 10_000_000


class _Job:
    """Two RocksDB subtasks of one operator (key groups split 0-63 / 64-127) under ``work``."""

    def __init__(self, work: str, n: int, options: RocksDBOptions) -> None:
        self.work, self.options = work, options
        ranges = [compute_key_group_range_for_operator_index(MAX_P, 2, i) for i in range(2)]
        self.subtasks = [self.backend(key_type=Types.LONG(), max_parallelism=MAX_P, key_group_range=r)
                         for r in ranges]  # fmt: skip
        self.assign = key_group_assigner(Types.LONG())
        self.update(range(n), 0)

    def backend(self, **kwargs: Any) -> RocksDBKeyedStateBackend:
        path = tempfile.mkdtemp(prefix="db-", dir=self.work)
        return RocksDBKeyedStateBackend(path, options=self.options, **kwargs)

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

    def bare_checkpoint(self) -> float:
        """Seconds RocksDB alone takes to checkpoint both subtasks (flush, hard links)."""
        import rocksdict

        gc.collect()
        targets = [tempfile.mktemp(prefix="bare-", dir=self.work) for _ in self.subtasks]
        start = time.perf_counter()
        for backend, target in zip(self.subtasks, targets, strict=True):
            backend.flush()  # our write buffer into RocksDB (a no-op here: updates are flushed)
            rocksdict.Checkpoint(backend._dir.db).create_checkpoint(target)
        elapsed = time.perf_counter() - start
        for target in targets:
            shutil.rmtree(target)
        return elapsed

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


def _increments(work: str, n: int, options: RocksDBOptions, rounds: int) -> dict[str, Any]:
    """One compaction style's rounds: incremental, floor and full native figures."""
    rng = random.Random(16)
    job = _Job(work, n, options)
    try:
        series = CheckpointStorage(f"{work}/series", retain=1, rocksdb_format="native")
        job.checkpoint(series)  # the base the increments build on
        inc_times, floors, fulls, uploaded = [], [], [], 0
        for r in range(rounds):
            job.update(rng.sample(range(n), n // 100), r + 1)
            if r % 2:
                floors.append(job.bare_checkpoint())
            elapsed, written, _ = job.checkpoint(series)
            uploaded += written
            if not r % 2:
                inc_times.append(elapsed)
            if not r % PAIR_EVERY:
                shutil.rmtree(f"{work}/full", ignore_errors=True)
                fulls.append(
                    job.checkpoint(CheckpointStorage(f"{work}/full", rocksdb_format="native"), cold=True)
                )
    finally:
        job.close()
        shutil.rmtree(work, ignore_errors=True)
    return {
        "time": statistics.median(inc_times),
        "floor": statistics.median(floors),
        "bytes": uploaded / rounds,
        "full_time": statistics.median(t for t, _, _ in fulls),
        "full_bytes": statistics.median(b for _, b, _ in fulls),
    }


def _fulls(work: str, n: int, rounds: int) -> tuple[list[Any], list[Any], list[Any]]:
    """(full native vs Parquet checkpoint, restore and rescale-restore times, paired)."""
    rng = random.Random(61)
    job = _Job(work, n, RocksDBOptions())
    try:
        fulls = []
        native = parquet = None
        for r in range(rounds):
            job.update(rng.sample(range(n), n // 100), r + 1)
            for old in ("native", "parquet"):
                shutil.rmtree(f"{work}/{old}", ignore_errors=True)
            t_native, _, native = job.checkpoint(
                CheckpointStorage(f"{work}/native", rocksdb_format="native"), cold=True
            )
            t_parquet, _, parquet = job.checkpoint(CheckpointStorage(f"{work}/parquet"))
            fulls.append((t_native, t_parquet))
        job.close()
        assert native is not None and parquet is not None
        restores = [(job.restore(native, 2), job.restore(parquet, 2)) for _ in range(rounds)]
        rescales = [(job.restore(native, 3), job.restore(parquet, 3)) for _ in range(rounds)]
    finally:
        job.close()
        shutil.rmtree(work, ignore_errors=True)
    return fulls, restores, rescales


def p16(quick: bool) -> Iterator[Result]:
    n = _size(quick)
    what = f"RocksDB, 2 subtasks, {n:,} ValueState entries"
    rounds = ROUNDS // 2 if quick else ROUNDS
    for style, options in STYLES.items():
        got = _increments(tempfile.mkdtemp(prefix="p16-"), n, options, rounds)
        full, inc = f"full native checkpoint of the same state ({style})", "incremental native checkpoint"
        yield Result("P16", f"{inc}, 1% of the keys changed, time ({what}, {style})",
                     got["time"] * 1e3, "ms", full, got["full_time"] * 1e3, got["full_time"] / got["time"],
                     "<= 0.05x (ratio >= 20)", got["time"] <= 0.05 * got["full_time"])  # fmt: skip
        yield Result("P16", f"RocksDB's own checkpoint of 1% changed keys: flush, links ({what}, {style})",
                     got["floor"] * 1e3, "ms", full, got["full_time"] * 1e3, got["full_time"] / got["floor"],
                     "(reference: the floor of an incremental checkpoint's time)", None)  # fmt: skip
        yield Result("P16", f"{inc}, 1% of the keys changed, time against RocksDB's own checkpoint "
                     f"({what}, {style})", got["time"] * 1e3, "ms", "RocksDB's own checkpoint (the floor)",
                     got["floor"] * 1e3, got["floor"] / got["time"], FLOOR_GOAL,
                     got["time"] <= 2 * got["floor"])  # fmt: skip
        yield Result("P16", f"{inc}, 1% of the keys changed, bytes uploaded per round "
                     f"over {rounds} rounds ({what}, {style})", got["bytes"], "bytes",
                     f"{full}, bytes", got["full_bytes"], got["full_bytes"] / got["bytes"],
                     "<= 0.05x (ratio >= 20)", got["bytes"] <= 0.05 * got["full_bytes"])  # fmt: skip
    fulls, restores, rescales = _fulls(tempfile.mkdtemp(prefix="p16-"), n, 3)
    ours, anchor, ratio = paired(fulls)
    yield Result("P16", f"full native checkpoint ({what})", ours * 1e3, "ms",
                 "full Parquet checkpoint of the same state", anchor * 1e3, 1 / ratio,
                 ">= 10x faster (ratio >= 10)", 1 / ratio >= 10)  # fmt: skip
    for pairs, label, goal in (
        (restores, "restore at the same parallelism (2 subtasks)", 10.0),
        (rescales, "rescale-restore 2 → 3 (3 subtasks)", 3.0),
    ):
        ours, anchor, ratio = paired(pairs)
        yield Result("P16", f"{label} of a native checkpoint ({what})", ours * 1e3, "ms",
                     "the same from a Parquet checkpoint of the same state", anchor * 1e3, 1 / ratio,
                     f">= {goal:g}x faster (ratio >= {goal:g})", 1 / ratio >= goal)  # fmt: skip


BENCHMARKS = {"P16": p16}
