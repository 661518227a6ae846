"""P10: reading a real Flink savepoint (1M Long -> String ValueState entries) beside our
own format's read of the same state, both through the data source's reader (no Spark),
in rows per second on one core.

The savepoint is written by Flink itself (tests/fixtures/flink/generate.py --bench) into a
cache outside the repository, once, when a virtualenv with apache-flink 2.3 exists
(FLINK_VENV, default /work/flinkenv); without it and without the cache P10 is skipped.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.connector.source import FlinkStateDataSource
from flinkstate.state import HeapKeyedStateBackend, Types, ValueStateDescriptor

from common import Result, paired

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("FLINKSTATE_BENCH_CACHE", Path(tempfile.gettempdir()) / "flinkstate-bench"))
VENV = Path(os.environ.get("FLINK_VENV", "/work/flinkenv"))


def _savepoint(n: int) -> str | None:
    work = CACHE / f"p10-{n}"
    found = glob.glob(str(work / "savepoint-*" / "_metadata"))
    if not found and (VENV / "bin" / "python").exists():
        generator = ROOT / "tests" / "fixtures" / "flink" / "generate.py"
        cmd = [str(VENV / "bin" / "python"), str(generator), "--venv", str(VENV), "--work", str(work)]
        subprocess.run([*cmd, "--bench", str(n)], check=True, capture_output=True)
        found = glob.glob(str(work / "savepoint-*" / "_metadata"))
    return str(Path(found[0]).parent) if found else None


def _ours(n: int, root: str) -> str:
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    state = backend.get_state(ValueStateDescriptor("value", Types.STRING()))
    for k in range(n):
        backend.set_current_key(k)
        state.update(f"value-{k}")
    storage = CheckpointStorage(root, retain=1)
    pending = storage.begin()
    pending.write_keyed("bench", backend).result()
    pending.commit()
    return root


def _read(path: str) -> tuple[float, int]:
    """Seconds to read every row of the state through the data source reader, and the rows."""
    start = time.perf_counter()
    source = FlinkStateDataSource({"path": path, "operator": "bench", "state": "value"})
    reader: Any = source.reader(source.schema())
    rows = sum(batch.num_rows for p in reader.partitions() for batch in reader.read(p))
    return time.perf_counter() - start, rows


def p10(quick: bool) -> Iterator[Result]:
    n = 1_000_000
    flink = _savepoint(n)
    if flink is None:
        print(
            f"P10 skipped: no savepoint cache in {CACHE} and no Flink virtualenv at {VENV}", file=sys.stderr
        )
        return
    with tempfile.TemporaryDirectory() as tmp:
        ours = _ours(n, tmp)
        _read(flink), _read(ours)  # warm-up: imports, page cache
        rounds = []
        for _ in range(1 if quick else 5):
            (tf, rf), (to, ro) = _read(flink), _read(ours)
            assert rf == ro == n, (rf, ro)
            rounds.append((n / tf, n / to))
    flink_rate, ours_rate, ratio = paired(rounds)
    yield Result(
        "P10", "Flink canonical savepoint read, Long->String ValueState, 1M rows", flink_rate, "rows/s/core",
        "our format's read of the same state (same reader API)", ours_rate, ratio,
        ">= 1M rows/s per core", flink_rate >= 1_000_000,
    )  # fmt: skip


BENCHMARKS = {"P10": p10}
