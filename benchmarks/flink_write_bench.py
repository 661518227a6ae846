"""P15: writing a Flink canonical savepoint (``write_savepoint``) of Long -> String
ValueState entries beside writing our own format (``begin_savepoint``) from the same state,
in rows per CPU-second (every thread of the process counted, so a writer thread cannot make
a figure look better than one core gives).

Both start from the same state, built once before timing: the heap backend our format writes
from, and our savepoint of that backend, opened (manifest in memory), which is what
``write_savepoint`` takes. So the Flink figure includes reading that source's files (warm in
the page cache after the warm-up round) and ``write_savepoint`` reading the new savepoint's
``_metadata`` back, which its API does; ours writes straight from the backend.

Written for Flink 2.3 (the default) and for Flink 1.20 (``flink_version="1.20"``); and beside
them, ``write_savepoint`` of P10's savepoints written by Flink 2.3 and by Flink 1.20 (the same
entries, read through their canonical key-group blocks and carried), against the same write of
our own format: what an edit or a migration of a real savepoint costs.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator

from flinkstate.checkpoint import CompletedCheckpoint, begin_savepoint, open_checkpoint
from flinkstate.checkpoint.flink import FlinkSavepoint, write_savepoint
from flinkstate.state import HeapKeyedStateBackend, Types, ValueStateDescriptor

from common import Result, paired
from flink_bench import VENVS, _read, _savepoint, _skipped


def _backend(n: int) -> HeapKeyedStateBackend:
    """Operator "bench"'s state, as P10's: ValueState "value" holding ``value-k`` for key ``k``."""
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    state = backend.get_state(ValueStateDescriptor("value", Types.STRING()))
    for k in range(n):
        backend.set_current_key(k)
        state.update(f"value-{k}")
    return backend


def _write_ours(backend: HeapKeyedStateBackend, target: str) -> float:
    """CPU seconds to write ``backend`` as our savepoint in the new directory ``target``."""
    start = time.process_time()
    pending = begin_savepoint(target)
    pending.write_keyed("bench", backend).result()
    pending.commit()
    return time.process_time() - start


def _write_flink(
    source: CompletedCheckpoint | FlinkSavepoint, target: str, release: str | None = None
) -> float:
    """CPU seconds to write ``source`` (an opened checkpoint) as a Flink savepoint in ``target``
    (for Flink ``release``; None: the default, the newest)."""
    start = time.process_time()
    write_savepoint(source, target, flink_version=release)
    return time.process_time() - start


def _carried(
    n: int, quick: bool, backend: HeapKeyedStateBackend, work: str
) -> dict[str, list[tuple[float, float]]]:
    """(rows/s of ``write_savepoint`` of P10's savepoint of ``n`` entries written by each Flink
    release, rows/s of our format's write of ``backend``) pairs, by release found."""
    carried = {}
    for release in VENVS:
        path = _savepoint(n, flink=release)
        if path is None:
            _skipped("P15 (from a Flink savepoint)", release)
            continue
        saved = open_checkpoint(path)
        _write_flink(saved, os.path.join(work, f"carried-warm-{release}"))
        assert _read(os.path.join(work, f"carried-warm-{release}"))[1] == n
        pairs = []
        for i in range(1 if quick else 3):
            cpu = _write_flink(saved, os.path.join(work, f"carried-{release}-{i}"))
            ours = _write_ours(backend, os.path.join(work, f"ours-carried-{release}-{i}"))
            pairs.append((n / cpu, n / ours))
        carried[release] = pairs
    return carried


def p15(quick: bool) -> Iterator[Result]:
    n = 100_000 if quick else 1_000_000
    backend = _backend(n)
    with tempfile.TemporaryDirectory(prefix="flinkstate-p15-") as work:
        _write_ours(backend, os.path.join(work, "source"))
        source = open_checkpoint(os.path.join(work, "source"))
        # warm-up: imports, first-touch memory, page cache; and a check of what is written
        for release in VENVS:
            _write_flink(source, os.path.join(work, f"flink-warm-{release}"), release)
            rows = _read(os.path.join(work, f"flink-warm-{release}"))[1]
            assert rows == n, (release, rows, n)
        _write_ours(backend, os.path.join(work, "ours-warm"))
        rounds: dict[str, list[tuple[float, float]]] = {release: [] for release in VENVS}
        for i in range(1 if quick else 5):
            for release, pairs in rounds.items():
                flink = _write_flink(source, os.path.join(work, f"flink-{release}-{i}"), release)
                ours = _write_ours(backend, os.path.join(work, f"ours-{release}-{i}"))
                pairs.append((n / flink, n / ours))
        carried = _carried(n, quick, backend, work)
    backend.close()
    for release, pairs in rounds.items():
        flink_rate, ours_rate, ratio = paired(pairs)
        yield Result(
            "P15", f"Flink {release} canonical savepoint write (write_savepoint), Long->String, {n} rows",
            flink_rate, "rows/s/core", "our format's write of the same state (begin_savepoint), same run",
            ours_rate, ratio, ">= 1M rows/s per core and >= 0.5x",
            flink_rate >= 1_000_000 and ratio >= 0.5,
        )  # fmt: skip
    for release, pairs in carried.items():
        rate, anchor, carried_ratio = paired(pairs)
        yield Result(
            "P15", f"write_savepoint of a Flink {release} canonical savepoint, Long->String, {n} rows",
            rate, "rows/s/core", "our format's write of the same state (begin_savepoint), same run", anchor,
            carried_ratio, "reference", None,
        )  # fmt: skip


BENCHMARKS = {"P15": p15}
