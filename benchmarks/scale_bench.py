"""P13 scale: fill, full checkpoint, restore (2 subtasks) and rescale-restore (2 → 3) of one
ValueState (LONG → LONG), at growing entry counts, per backend and checkpoint format; the
log-log slope of each operation between sizes (goal ≤ 1.1: the cost per entry does not grow)
and the peak resident memory against the configured RocksDB budget.

Each (backend, format, size) runs in its own subprocess, so its peak RSS is its own. Sizes:
RocksDB 1M and 10M (100M too in the full run), the heap 1M and 10M; ``P13_SIZES=10000,20000``
overrides both (a smoke run). Checkpoint formats of RocksDB are :data:`ROCKSDB_FORMATS`.
``P13_CASES=rocksdb-parquet`` runs only the cases named (``rocksdb-<format>``, ``heap``;
comma-separated), e.g. to measure one at 100M entries. ``P13_REPEATS=1`` overrides the runs
per size (:data:`REPEATS`)."""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator

from flinkstate.state import RocksDBOptions

from common import Result

ROCKSDB_FORMATS: dict[str, dict[str, str]] = {"parquet": {}, "native": {"rocksdb_format": "native"}}
"""Checkpoint format → the ``CheckpointStorage`` arguments choosing it, each measured."""

OPERATIONS = ("fill", "checkpoint", "restore", "rescale")
LABELS = {
    "fill": "fill (2 subtasks, set_current_key + update)",
    "checkpoint": "full checkpoint (2 subtasks)",
    "restore": "restore at the same parallelism (2 subtasks)",
    "rescale": "rescale-restore 2 → 3 (3 subtasks)",
}
_DICT = ("dict", "a plain dict filled with the same keys (what the heap's tables are built on)")
FLOORS = {
    "fill": (_DICT,),
    "restore": (("copy", "copying the checkpoint's files (what a native restore downloads)"), _DICT),
    "rescale": (_DICT,),
}
"""Operation → its floors, (figure, what it is): the same work done by a dependency alone,
measured in the same run where the run has it (the first one a run has is reported), so a
slope can be compared with its floor's."""
REPEATS = {"heap": 3}
"""Runs per size in the full run (``--quick``: one; ``P13_REPEATS`` overrides both): the
heap's runs are short and its slopes move with the machine by about ±0.1 run to run, so
each of its figures is a median of three."""
REBASED = "<= 1.1, or <= the floor's slope + 0.1 (re-based on a floor steeper than linear)"
"""The slope goal where an operation has a floor: a dependency doing the same work alone
(a dict filling, files copying) can grow faster than linearly on this machine (its memory
no longer fits the caches), and an operation doing that work cannot be expected to grow
more slowly than the dependency alone. The goal's 0.1 over linear becomes 0.1 over the
floor: the operation's cost per unit of the floor's may grow as little as 1.1 allows."""
PYTHON_ALLOWANCE = 512 << 20
"""Peak RSS a RocksDB run may use beyond its RocksDB budget: the interpreter, pyarrow, and
the key groups a restore decodes at a time (bounded by the key groups' size, not the state's)."""

_RUN = r"""
import gc, json, resource, shutil, sys, tempfile, time
from flinkstate.checkpoint import CheckpointStorage
from flinkstate.state import (HeapKeyedStateBackend, RocksDBKeyedStateBackend, RocksDBOptions, Types,
                              ValueStateDescriptor, compute_key_group_range_for_operator_index)
from flinkstate.state.keygroups.hashing import key_group_assigner

kind, n, storage_args, root = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
MAX_P, DESC, OPTIONS = 128, ValueStateDescriptor("v", Types.LONG()), RocksDBOptions()
made = []

def backend(**kw):
    if kind == "heap":
        return HeapKeyedStateBackend(**kw)
    made.append(tempfile.mkdtemp(dir=root))
    return RocksDBKeyedStateBackend(made[-1], options=OPTIONS, **kw)

def restore(checkpoint, p):
    start = time.perf_counter()
    for i in range(p):
        checkpoint.keyed_backend("op", i, p, backend_factory=backend).close()
    return time.perf_counter() - start

out = {}
ranges = [compute_key_group_range_for_operator_index(MAX_P, 2, i) for i in range(2)]
subtasks = [backend(key_type=Types.LONG(), max_parallelism=MAX_P, key_group_range=r) for r in ranges]
states = [b.get_state(DESC) for b in subtasks]
half, assign = MAX_P // 2, key_group_assigner(Types.LONG())
start = time.perf_counter()
if kind == "heap":
    for k in range(n):
        i = assign(k, MAX_P) >= half
        subtasks[i].set_current_key(k)
        states[i].update(k)
else:
    with subtasks[0].write_batch(), subtasks[1].write_batch():
        for k in range(n):
            i = assign(k, MAX_P) >= half
            subtasks[i].set_current_key(k)
            states[i].update(k)
out["fill"] = time.perf_counter() - start
start = time.perf_counter()
pending = CheckpointStorage(root + "/checkpoints", **storage_args).begin()
for i, b in enumerate(subtasks):
    pending.write_subtask("op", i, 2, MAX_P, keyed=b)
checkpoint = pending.commit()
out["checkpoint"] = time.perf_counter() - start
for b in subtasks:
    b.close()
del subtasks, states, b
gc.collect()
if storage_args.get("rocksdb_format") == "native":
    # the native restore's floor: copying the checkpoint's files (what a restore downloads)
    copy = tempfile.mkdtemp(dir=root)
    start = time.perf_counter()
    shutil.copytree(root + "/checkpoints", copy + "/files")
    out["copy"] = time.perf_counter() - start
    shutil.rmtree(copy)
out["restore"] = restore(checkpoint, 2)
out["rescale"] = restore(checkpoint, 3)
if kind == "heap":
    # the heap fill's floor: a plain dict filled with the same (key, namespace) keys
    gc.collect()
    start = time.perf_counter()
    plain = {}
    for k in range(n):
        plain[(k, None)] = k
    out["dict"] = time.perf_counter() - start
    del plain
out["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out))
"""


def _sizes(quick: bool) -> tuple[list[int], list[int]]:
    """(RocksDB sizes, heap sizes)."""
    override = os.environ.get("P13_SIZES")
    if override:
        sizes = [int(s) for s in override.split(",") if s.strip()]
        return sizes, sizes
    rocks = [1_000_000, 10_000_000] + ([] if quick else [100_000_000])
    return rocks, [1_000_000, 10_000_000]


def _run(kind: str, n: int, storage_args: dict[str, str]) -> dict[str, float]:
    root = tempfile.mkdtemp(prefix="p13-")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _RUN, kind, str(n), json.dumps(storage_args), root],
            capture_output=True,
            text=True,
            check=True,
        )
        figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
        return figures
    finally:
        shutil.rmtree(root, ignore_errors=True)


def slope(n1: int, t1: float, n2: int, t2: float) -> float:
    """The log-log slope of a cost between two sizes (1.0: linear)."""
    return math.log(t2 / t1) / math.log(n2 / n1)


def _repeated(
    kind: str, sizes: list[int], storage_args: dict[str, str], repeats: int
) -> list[tuple[int, dict[str, float]]]:
    """Each size's figures: the median of ``repeats`` runs of ``kind`` (peak RSS: the
    largest), the sizes taken in turn so that a slow spell of the machine hits all alike."""
    done: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    for _ in range(max(repeats, 1)):
        for n in sizes:
            done[n].append(_run(kind, n, storage_args))
    return [
        (
            n,
            {
                k: max(r[k] for r in rs) if k == "peak_rss" else statistics.median(r[k] for r in rs)
                for k in rs[0]
            },
        )
        for n, rs in done.items()
    ]


def _series(
    name: str, kind: str, sizes: list[int], storage_args: dict[str, str], quick: bool
) -> Iterator[Result]:
    repeats = int(os.environ.get("P13_REPEATS", 1 if quick else REPEATS.get(kind, 1)))
    runs = _repeated(kind, sizes, storage_args, repeats)
    budget = RocksDBOptions().memory_budget
    for op in OPERATIONS:
        n0, first = runs[0]
        for n, figures in runs:
            linear = first[op] * n / n0
            yield Result("P13", f"{name}: {LABELS[op]}, {n:,} entries ({figures[op] / n * 1e6:.2f} µs/entry)",
                         figures[op], "s", f"{n0:,} entries' time scaled linearly", linear,
                         linear / figures[op], "(reference)", None)  # fmt: skip
        for (n1, a), (n2, b) in itertools.pairwise(runs):
            s = slope(n1, a[op], n2, b[op])
            yield Result("P13", f"{name}: {LABELS[op]}, log-log slope {n1:,} → {n2:,}", s, "slope",
                         "linear", 1.0, 1.0 / max(s, 0.01), "<= 1.1", s <= 1.1)  # fmt: skip
        yield from _floor(name, op, runs)
    for n, figures in runs:
        rss = figures["peak_rss"]
        if kind == "heap":
            yield Result("P13", f"{name}: peak RSS, {n:,} entries", rss / 2**20, "MiB",
                         "RocksDB budget (block cache)", budget / 2**20, budget / rss, "(reference)",
                         None)  # fmt: skip
        else:
            limit = budget + PYTHON_ALLOWANCE
            yield Result("P13", f"{name}: peak RSS, {n:,} entries", rss / 2**20, "MiB",
                         f"RocksDB budget (block cache) + {PYTHON_ALLOWANCE >> 20} MiB Python", limit / 2**20,
                         limit / rss, "<= budget + allowance", rss <= limit)  # fmt: skip


def _floor(name: str, op: str, runs: list[tuple[int, dict[str, float]]]) -> Iterator[Result]:
    """Reference lines: the operation's floor (:data:`FLOORS`) at each size and its slope."""
    present = [floor for floor in FLOORS.get(op, ()) if floor[0] in runs[0][1]]
    if not present:
        return
    key, what = present[0]
    for n, figures in runs:
        yield Result("P13", f"{name}: floor of {LABELS[op]}: {what}, {n:,} entries", figures[key], "s",
                     f"{LABELS[op]}, {n:,} entries", figures[op], figures[op] / figures[key],
                     "(reference)", None)  # fmt: skip
    for (n1, a), (n2, b) in itertools.pairwise(runs):
        s, ours = slope(n1, a[key], n2, b[key]), slope(n1, a[op], n2, b[op])
        yield Result("P13", f"{name}: floor of {LABELS[op]}: {what}, log-log slope {n1:,} → {n2:,}", s,
                     "slope", f"{LABELS[op]}'s slope", ours, 1.0 / max(s, 0.01),
                     "(reference)", None)  # fmt: skip
        yield Result("P13", f"{name}: {LABELS[op]}, log-log slope {n1:,} → {n2:,} against its floor's",
                     ours, "slope", f"the floor's slope ({what})", s, max(s, 0.01) / max(ours, 0.01),
                     REBASED, ours <= max(1.1, s + 0.1))  # fmt: skip


def p13(quick: bool) -> Iterator[Result]:
    rocks, heap = _sizes(quick)
    cases = {c.strip() for c in os.environ.get("P13_CASES", "").split(",") if c.strip()}
    for fmt, storage_args in ROCKSDB_FORMATS.items():
        if not cases or f"rocksdb-{fmt}" in cases:
            yield from _series(f"RocksDB, {fmt} checkpoints", "rocksdb", rocks, storage_args, quick)
    if not cases or "heap" in cases:
        yield from _series("heap", "heap", heap, {}, quick)


BENCHMARKS = {"P13": p13}
