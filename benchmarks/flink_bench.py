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


def _savepoint(n: int, native: bool = False) -> str | None:
    work = CACHE / f"p10{'r' if native else ''}-{n}"
    found = glob.glob(str(work / "savepoint-*" / "_metadata"))
    if not found and (VENV / "bin" / "python").exists():
        generator = ROOT / "tests" / "fixtures" / "flink" / "generate.py"
        cmd = [str(VENV / "bin" / "python"), str(generator), "--venv", str(VENV), "--work", str(work)]
        flags = ["--native"] if native else []
        subprocess.run([*cmd, "--bench", str(n), *flags], check=True, capture_output=True)
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


def _read(path: str, state: str = "value") -> tuple[float, int]:
    """Seconds to read every row of the state through the data source reader, and the rows."""
    start = time.perf_counter()
    source = FlinkStateDataSource({"path": path, "operator": "bench", "state": state})
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


def _native_db(path: str, n: int) -> None:
    """A RocksDB column family the way Flink's RocksDB backend lays out a Long -> String
    ValueState (key-group byte, key, void namespace; snappy blocks, XXH3 checksums)."""
    from rocksdict import BlockBasedOptions, ChecksumType, DBCompressionType, Options, Rdict

    table = BlockBasedOptions()
    table.set_checksum_type(ChecksumType.xxh3())
    table.set_format_version(5)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_compression_type(DBCompressionType.snappy())
    opts.set_block_based_table_factory(table)
    db = Rdict(path, opts)
    for k in range(n):
        value = f"value-{k}".encode()
        db.put(bytes([k % 128]) + k.to_bytes(8, "big") + b"\0", len(value).to_bytes(2, "big") + value)
    db.flush()
    db.close()


def _sst_scan(path: str) -> tuple[float, int]:
    from flinkstate.checkpoint.flink.rocksdb.native_read import resolve
    from flinkstate.checkpoint.flink.rocksdb.sst_read import open_table

    start = time.perf_counter()
    tables = [open_table(p.read_bytes(), p.name) for p in Path(path).glob("*.sst")]
    rows = sum(1 for _ in resolve(tables))
    return time.perf_counter() - start, rows


def _rocksdict_scan(path: str) -> tuple[float, int]:
    from rocksdict import AccessType, Options, Rdict

    start = time.perf_counter()
    db = Rdict(path, Options(raw_mode=True), access_type=AccessType.read_only())
    it = db.iter()
    it.seek_to_first()
    rows = 0
    while it.valid():
        bytes(it.key()), bytes(it.value())
        rows += 1
        it.next()
    del it
    db.close()
    return time.perf_counter() - start, rows


def p10n(quick: bool) -> Iterator[Result]:
    """Native snapshots: our SST reader's resolved scan of one column family beside RocksDB
    (rocksdict) iterating the same files, both giving every (key, value) as bytes."""
    n = 200_000 if quick else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        _native_db(tmp, n)
        _sst_scan(tmp), _rocksdict_scan(tmp)  # warm-up: imports, page cache
        rounds = []
        for _ in range(1 if quick else 5):
            (to, ro), (ta, ra) = _sst_scan(tmp), _rocksdict_scan(tmp)
            assert ro == ra == n, (ro, ra)
            rounds.append((n / to, n / ta))
    ours, anchor, ratio = paired(rounds)
    yield Result(
        "P10N", f"SST scan of a Flink-layout column family (native snapshots), {n} rows", ours, "rows/s/core",
        "rocksdict (RocksDB) iterating the same SST files", anchor, ratio, ">= 0.5x", ratio >= 0.5,
    )  # fmt: skip


def p10r(quick: bool) -> Iterator[Result]:
    """A RocksDB native savepoint written by Flink (1M Long -> String ValueState entries, and a
    ListState of two appends per key) read through the data source reader, beside P10's
    canonical savepoint of the same ValueState."""
    n = 1_000_000
    native, canonical = _savepoint(n, native=True), _savepoint(n)
    if native is None or canonical is None:
        print(
            f"P10R skipped: no savepoint cache in {CACHE} and no Flink virtualenv at {VENV}", file=sys.stderr
        )
        return
    _read(native), _read(canonical)  # warm-up: imports, page cache
    rounds, lists = [], []
    for _ in range(1 if quick else 3):
        (tn, rn), (tc, rc) = _read(native), _read(canonical)
        tl, rl = _read(native, "list")
        assert rn == rc == n and rl == 2 * n, (rn, rc, rl)
        rounds.append((n / tn, n / tc))
        lists.append((rl / tl, n / tn))
    native_rate, canonical_rate, ratio = paired(rounds)
    yield Result(
        "P10R", "Flink RocksDB native savepoint (SST files), Long->String ValueState, 1M rows", native_rate,
        "rows/s/core", "the canonical savepoint of the same state (P10's)", canonical_rate, ratio,
        "reference", None,
    )  # fmt: skip
    list_rate, value_rate, list_ratio = paired(lists)
    yield Result(
        "P10R", "the same native savepoint's ListState<Long> (2 appends per key: merge operands), 2M rows",
        list_rate, "rows/s/core", "its ValueState read (above)", value_rate, list_ratio, "reference", None,
    )  # fmt: skip


BENCHMARKS = {"P10": p10, "P10N": p10n, "P10R": p10r}
