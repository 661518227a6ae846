"""P14: incremental checkpoints against full ones, and the cost of recording changes."""

from __future__ import annotations

import gc
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, PendingCheckpoint
from flinkstate.state import (
    AbstractKeyedStateBackend,
    HeapKeyedStateBackend,
    RocksDBKeyedStateBackend,
    Types,
    ValueStateDescriptor,
)

from common import Result, filled, paired

DESC = ValueStateDescriptor("v", Types.LONG())
Factory = Callable[..., AbstractKeyedStateBackend]


def _rocksdb(**kwargs: Any) -> RocksDBKeyedStateBackend:
    return RocksDBKeyedStateBackend(tempfile.mkdtemp(prefix="p14-rocksdb-"), **kwargs)


def _dispose(backend: AbstractKeyedStateBackend) -> None:
    backend.close()
    if isinstance(backend, RocksDBKeyedStateBackend):
        shutil.rmtree(backend.path, ignore_errors=True)


def _filled(n: int, factory: Factory) -> AbstractKeyedStateBackend:
    if factory is HeapKeyedStateBackend:
        return filled(n, DESC)
    backend = factory(key_type=Types.LONG())
    assert isinstance(backend, RocksDBKeyedStateBackend)
    state = backend.get_state(DESC)
    with backend.write_batch():
        for k in range(n):
            backend.set_current_key(k)
            state.update(k)
    return backend


def _checkpoint(storage: CheckpointStorage, backend: AbstractKeyedStateBackend) -> tuple[float, ...]:
    """(synchronous part: the snapshot, as Flink's sync duration counts it; the same plus
    the hand-off to the writer threads, what ``write_keyed`` costs the caller; the whole
    checkpoint: begin to commit) in seconds, and the bytes it wrote."""
    gc.collect()
    start = time.perf_counter()
    pending: PendingCheckpoint = storage.begin()
    begun = time.perf_counter()
    snapshot = pending.snapshot(backend, "op")
    taken = time.perf_counter()
    future = pending.write_snapshot("op", snapshot)
    handed = time.perf_counter()
    future.result()
    done = pending.commit()
    total = time.perf_counter() - start
    written = sum(f.size for f in done.manifest.files() if f.checkpoint_id == done.checkpoint_id)
    return taken - begun, handed - begun, total, written


def _restore(storage: CheckpointStorage, factory: Factory) -> float:
    checkpoint: CompletedCheckpoint = storage.load()
    gc.collect()
    start = time.perf_counter()
    backend = checkpoint.keyed_backend("op", 0, 1, backend_factory=factory)
    elapsed = time.perf_counter() - start
    _dispose(backend)
    return elapsed


def _update_some(backend: AbstractKeyedStateBackend, keys: list[int], round_: int) -> None:
    state = backend.get_state(DESC)
    for k in keys:
        backend.set_current_key(k)
        state.update(k + round_)


def checkpoints(quick: bool, rocksdb: bool = False) -> Iterator[Result]:
    """Heap: 5M entries, 10 increments; RocksDB (whose full checkpoint reads every entry
    through Python, about 8 s per million): 1M entries, 5 increments."""
    n = (100_000 if rocksdb else 200_000) if quick else (1_000_000 if rocksdb else 5_000_000)
    increments = 3 if quick else (5 if rocksdb else 10)
    factory: Factory = _rocksdb if rocksdb else HeapKeyedStateBackend
    rng = random.Random(14)
    work = tempfile.mkdtemp(prefix="p14-")
    backend = None
    try:
        backend = _filled(n, factory)
        incremental = CheckpointStorage(f"{work}/incr", retain=1, incremental=True)
        full = CheckpointStorage(f"{work}/full", retain=1)
        _checkpoint(incremental, backend)  # the base
        rounds = []
        for i in range(increments):
            _update_some(backend, rng.sample(range(n), n // 100), i + 1)
            rounds.append((_checkpoint(incremental, backend), _checkpoint(full, backend)))
        chain = incremental.load().manifest.files()
        assert len(chain) == increments + 1, "the chain should be the base and every increment"
        restores = [
            (_restore(incremental, factory), _restore(full, factory)) for _ in range(1 if quick else 3)
        ]
    finally:
        if backend is not None:
            _dispose(backend)
        shutil.rmtree(work, ignore_errors=True)
    where = "RocksDB" if rocksdb else "heap"
    what = f"{where}, {n} ValueState entries, 1% of the keys updated"
    measures = (
        ("synchronous part", "ms", 1e3, "<= 0.05x (ratio >= 20)"),
        ("synchronous part and hand-off to the writer threads", "ms", 1e3,
         "(reference: what write_keyed costs the caller; Flink's sync duration excludes the hand-off)"),
        ("whole checkpoint", "ms", 1e3, "<= 0.05x (ratio >= 20)"),
        ("bytes written", "bytes", 1, "<= 0.05x (ratio >= 20)"),
    )  # fmt: skip
    for index, (label, unit, scale, goal) in enumerate(measures):
        ours, anchor, ratio = paired([(r[0][index] * scale, r[1][index] * scale) for r in rounds])
        yield Result("P14", f"incremental checkpoint, {label} ({what})", ours, unit,
                     f"full checkpoint of the same state, {label}", anchor, 1 / ratio, goal,
                     ratio <= 0.05 if goal.startswith("<=") else None)  # fmt: skip
    ours, anchor, ratio = paired(restores)
    label = f"restore of a base plus {increments} increments ({where}, {n} entries)"
    yield Result("P14", label, ours * 1e3, "ms", "restore of a full checkpoint of the same state",
                 anchor * 1e3, 1 / ratio, "<= 1.5x the time (ratio >= 0.67)", ratio <= 1.5)  # fmt: skip


def recording(quick: bool, rocksdb: bool = False) -> Iterator[Result]:
    """Per update(): a backend recording changes against one that does not, same keys."""
    n = 200_000 if quick else 1_000_000
    factory: Factory = _rocksdb if rocksdb else HeapKeyedStateBackend
    recording_backend, plain = _filled(n, factory), _filled(n, factory)
    recording_backend.snapshot_for_checkpoint(1).release()  # recording starts with the first checkpoint
    plain.snapshot().release()
    keys = list(range(n))
    random.Random(3).shuffle(keys)

    def run(backend: AbstractKeyedStateBackend, value: int) -> float:
        state = backend.get_state(DESC)
        set_key, update = backend.set_current_key, state.update
        gc.collect()
        start = time.perf_counter()
        for k in keys:
            set_key(k)
            update(value)
        return (time.perf_counter() - start) / n

    rounds = []
    for i in range(3 if quick else 7):
        with recording_backend.snapshot_for_checkpoint(i + 2) as snap:  # a new epoch: empty sets
            snap.changes.confirm(i + 2)  # type: ignore[union-attr]
        if i % 2:
            rounds.append((run(recording_backend, i), run(plain, i)))
        else:
            anchor = run(plain, i)
            rounds.append((run(recording_backend, i), anchor))
    _dispose(recording_backend)
    _dispose(plain)
    where = "RocksDB" if rocksdb else "heap"
    ours, anchor, ratio = paired(rounds)
    label = f"set_current_key + update() with change recording ({where}, {n} keys, every key once)"
    yield Result("P14", label, ours * 1e9, "ns", "the same on a backend that does not record changes",
                 anchor * 1e9, 1 / ratio, "<= 1.10x the time (ratio >= 0.91)", ratio <= 1.10)  # fmt: skip


def p14(quick: bool) -> Iterator[Result]:
    for rocksdb in (False, True):
        yield from recording(quick, rocksdb)
        yield from checkpoints(quick, rocksdb)


BENCHMARKS = {"P14": p14}
