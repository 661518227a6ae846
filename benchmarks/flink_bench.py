"""P10: reading a real Flink savepoint (1M Long -> String ValueState entries) beside our
own format's read of the same state, both through the data source's reader (no Spark),
in rows per second on one core; for a Flink 2.3 savepoint and a Flink 1.20 one. P10K: 1M
Kryo values (a class of long, int, double and String fields) read as a declared struct,
beside P10's Long -> String read in the same run. P10N, P10R: native (SST) savepoints.

The savepoints are written by Flink itself (tests/fixtures/flink/generate.py --bench) into a
cache outside the repository, once, when a virtualenv with that apache-flink exists
(FLINK_VENV, default /work/flinkenv, for 2.3; FLINK120_VENV, default /work/flinkenv120, for
1.20); without it and without the cache the figure is skipped.
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
#: The virtualenv holding each Flink release the savepoints are written with.
VENVS = {"2.3": VENV, "1.20": Path(os.environ.get("FLINK120_VENV", "/work/flinkenv120"))}
#: P10K's Kryo class (FixtureJob.BenchRecord) as a struct.
BENCH_RECORD = "STRUCT<id: BIGINT NOT NULL, count: INT NOT NULL, score: DOUBLE NOT NULL, name: STRING>"
#: The savepoints by kind: cache folder prefix, generate.py flags.
KINDS = {"canonical": ("p10", []), "native": ("p10r", ["--native"]), "kryo": ("p10k", ["--kryo"])}


def _savepoint(n: int, kind: str = "canonical", flink: str = "2.3") -> str | None:
    """A savepoint of ``n`` entries Flink ``flink`` wrote (made once into the cache)."""
    prefix, flags = KINDS[kind]
    work = CACHE / f"{prefix}-{n}{'' if flink == '2.3' else '-' + flink}"
    found = glob.glob(str(work / "savepoint-*" / "_metadata"))
    venv = VENVS[flink]
    if not found and (venv / "bin" / "python").exists():
        generator = ROOT / "tests" / "fixtures" / "flink" / "generate.py"
        cmd = [str(venv / "bin" / "python"), str(generator), "--flink", flink, "--venv", str(venv)]
        cmd += ["--work", str(work), "--bench", str(n), *flags]
        subprocess.run(cmd, check=True, capture_output=True)
        found = glob.glob(str(work / "savepoint-*" / "_metadata"))
    return str(Path(found[0]).parent) if found else None


def _skipped(figure: str, flink: str = "2.3") -> None:
    print(
        f"{figure} skipped: no savepoint cache in {CACHE} and no Flink {flink} virtualenv at {VENVS[flink]}",
        file=sys.stderr,
    )


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


def _read(path: str, state: str = "value", value_type: str | None = None) -> tuple[float, int]:
    """Seconds to read every row of the state through the data source reader, and the rows."""
    start = time.perf_counter()
    options = {"path": path, "operator": "bench", "state": state}
    if value_type is not None:
        options["valueType"] = value_type
    source = FlinkStateDataSource(options)
    reader: Any = source.reader(source.schema())
    rows = sum(batch.num_rows for p in reader.partitions() for batch in reader.read(p))
    return time.perf_counter() - start, rows


def p10(quick: bool) -> Iterator[Result]:
    n = 1_000_000
    found = {flink: _savepoint(n, flink=flink) for flink in VENVS}
    for flink, path in found.items():
        if path is None:
            _skipped("P10", flink)
    with tempfile.TemporaryDirectory() as tmp:
        ours = _ours(n, tmp)
        flinks = {flink: path for flink, path in found.items() if path is not None}
        for path in [*flinks.values(), ours]:
            _read(path)  # warm-up: imports, page cache
        rounds: dict[str, list[tuple[float, float]]] = {flink: [] for flink in flinks}
        for _ in range(1 if quick else 5):
            for flink, path in flinks.items():
                (tf, rf), (to, ro) = _read(path), _read(ours)
                assert rf == ro == n, (rf, ro)
                rounds[flink].append((n / tf, n / to))
    for flink, pairs in rounds.items():
        flink_rate, ours_rate, ratio = paired(pairs)
        yield Result(
            "P10", f"Flink {flink} canonical savepoint read, Long->String ValueState, 1M rows", flink_rate,
            "rows/s/core", "our format's read of the same state (same reader API)", ours_rate, ratio,
            ">= 1M rows/s per core and >= 0.3x", flink_rate >= 1_000_000 and ratio >= 0.3,
        )  # fmt: skip


def p10k(quick: bool) -> Iterator[Result]:
    """1M Kryo values (FixtureJob.BenchRecord) read as a declared struct, beside P10's
    Long -> String read of the same size, both Flink 2.3 canonical savepoints."""
    n = 1_000_000
    kryo, strings = _savepoint(n, "kryo"), _savepoint(n)
    if kryo is None or strings is None:
        _skipped("P10K")
        return
    _read(kryo, "kryo", BENCH_RECORD), _read(strings)  # warm-up: imports, page cache
    rounds = []
    for _ in range(1 if quick else 5):
        (tk, rk), (ts, rs) = _read(kryo, "kryo", BENCH_RECORD), _read(strings)
        assert rk == rs == n, (rk, rs)
        rounds.append((n / tk, n / ts))
    kryo_rate, strings_rate, ratio = paired(rounds)
    yield Result(
        "P10K", "Flink canonical savepoint read, 1M Kryo values (long, int, double, String) as structs",
        kryo_rate, "rows/s/core", "P10's Long->String read (Flink 2.3), same run", strings_rate, ratio,
        ">= 0.5x", ratio >= 0.5,
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
    native, canonical = _savepoint(n, "native"), _savepoint(n)
    if native is None or canonical is None:
        _skipped("P10R")
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


BENCHMARKS = {"P10": p10, "P10K": p10k, "P10N": p10n, "P10R": p10r}
