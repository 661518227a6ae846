"""P9: the RocksDB backend against raw rocksdict doing the same reads and writes on the
same keys (same DB options, WAL off, same cache), with the heap backend beside it; and
the peak resident memory of 10M value entries on each backend (one subprocess each)."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    RocksDBKeyedStateBackend,
    RocksDBOptions,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.rocksdb.options import RocksDBMemory

from common import Result, paired

DESC = ValueStateDescriptor("count", Types.LONG())
EVENTS = ListStateDescriptor("events", Types.LONG())
LONG = struct.Struct(">q")


def _records(n_keys: int, n_records: int) -> list[int]:
    rnd = random.Random(9)
    return [rnd.randrange(n_keys) for _ in range(n_records)]


def _ours_list_adds(records: list[int], backend: Any) -> float:
    state = backend.get_list_state(EVENTS)
    set_key, add = backend.set_current_key, state.add
    start = time.perf_counter()
    for k in records:
        set_key(k)
        add(k)
    return len(records) / (time.perf_counter() - start)


def _raw_list_rewrites(records: list[int], path: str) -> float:
    """The one-entry-per-list layout without a merge operator: every add reads the
    serialized list, appends and writes it back (same serializer as ours)."""
    from flinkstate.state.serializers.lookup import serializer_for

    serializer = serializer_for(Types.LIST(Types.LONG()))
    db, cf = _raw_db(path)
    get, put, pack = cf.get, cf.put, LONG.pack
    start = time.perf_counter()
    for k in records:
        kb = pack(k)
        data = get(kb)
        items = [] if data is None else serializer.from_bytes(data)
        items.append(k)
        put(kb, serializer.to_bytes(items))
    rate = len(records) / (time.perf_counter() - start)
    _close_raw(db, cf)
    return rate


def _in_tmp(fn: Callable[[str], float]) -> float:
    root = tempfile.mkdtemp(prefix="p9-")
    try:
        return fn(root + "/db")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _raw_db(path: str) -> tuple[Any, Any]:
    """A rocksdict DB with a column family, built exactly as the backend builds its own."""
    import rocksdict

    db_options, cf_options = RocksDBOptions().build(RocksDBMemory(RocksDBOptions()))
    db = rocksdict.Rdict(path, db_options)
    cf = db.create_column_family("s1", cf_options)
    cf.set_write_options(RocksDBOptions().write_options())
    return db, cf


def _close_raw(db: Any, cf: Any) -> None:
    cf.close()
    db.close()


def _ours_read_update(records: list[int], backend: Any) -> float:
    state = backend.get_state(DESC)
    set_key = backend.set_current_key
    start = time.perf_counter()
    for k in records:
        set_key(k)
        v = state.value()
        state.update(1 if v is None else v + 1)
    return len(records) / (time.perf_counter() - start)


def _raw_read_update(records: list[int], path: str) -> float:
    """Per record: the key's bytes, a get, decode, encode, a put (what a raw user writes)."""
    db, cf = _raw_db(path)
    get, put, pack, unpack = cf.get, cf.put, LONG.pack, LONG.unpack
    start = time.perf_counter()
    for k in records:
        kb = pack(k)
        v = get(kb)
        put(kb, pack(1 if v is None else unpack(v)[0] + 1))
    rate = len(records) / (time.perf_counter() - start)
    _close_raw(db, cf)
    return rate


def _ours_batched(records: list[int], backend: Any) -> float:
    """Blind updates inside ``write_batch()`` (WriteBatches of 1000, like the anchor)."""
    state = backend.get_state(DESC)
    set_key, update = backend.set_current_key, state.update
    with backend.write_batch(1000):
        start = time.perf_counter()
        for k in records:
            set_key(k)
            update(k)
    return len(records) / (time.perf_counter() - start)


def _ceiling_batched(records: list[int], path: str) -> float:
    """What no state layer on this base can beat: set_current_key (key group) and the
    key's bytes framed as ours, into raw WriteBatches (no state object, no funnel)."""
    import rocksdict

    db, cf = _raw_db(path)
    handle = db.get_column_family_handle("s1")
    write_options = RocksDBOptions().write_options()
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    set_key, pack = backend.set_current_key, LONG.pack
    start = time.perf_counter()
    for i in range(0, len(records), 1000):
        batch = rocksdict.WriteBatch(raw_mode=True)
        for k in records[i : i + 1000]:
            set_key(k)
            batch.put(b"\x01" + pack(k) + b"\x00", pack(k), handle)
        db.write(batch, write_options)
    rate = len(records) / (time.perf_counter() - start)
    backend.close()
    del handle
    _close_raw(db, cf)
    return rate


def _raw_batched(records: list[int], path: str, batch_size: int = 1000) -> float:
    """The same writes in rocksdict WriteBatches (the fastest way rocksdict writes)."""
    import rocksdict

    db, cf = _raw_db(path)
    handle = db.get_column_family_handle("s1")
    write_options = RocksDBOptions().write_options()
    pack = LONG.pack
    start = time.perf_counter()
    for i in range(0, len(records), batch_size):
        batch = rocksdict.WriteBatch(raw_mode=True)
        for k in records[i : i + batch_size]:
            batch.put(pack(k), pack(k), handle)
        db.write(batch, write_options)
    rate = len(records) / (time.perf_counter() - start)
    del handle
    _close_raw(db, cf)
    return rate


def _rocks(fn: Callable[[list[int], Any], float], records: list[int]) -> float:
    def run(path: str) -> float:
        with RocksDBKeyedStateBackend(path, key_type=Types.LONG()) as backend:
            return fn(records, backend)

    return _in_tmp(run)


def _heap(fn: Callable[[list[int], Any], float], records: list[int]) -> float:
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    try:
        return fn(records, backend)
    finally:
        backend.close()


def p9(quick: bool) -> Iterator[Result]:
    n_keys = 100_000 if quick else 1_000_000
    records = _records(n_keys, 2 * n_keys)
    runs = 1 if quick else 3
    rounds = [
        (_rocks(_ours_read_update, records), _in_tmp(lambda p: _raw_read_update(records, p)))
        for _ in range(runs)
    ]
    ours, raw, ratio = paired(rounds)
    yield Result("P9", f"value+update ops/s, {n_keys:,} keys", ours, "ops/s",
                 "raw rocksdict get+put, same keys and options", raw, ratio, ">= 0.7x",
                 ratio >= 0.7)  # fmt: skip
    heap = _heap(_ours_read_update, records)
    yield Result("P9", "heap backend value+update ops/s, same records", heap, "ops/s",
                 "RocksDB backend", ours, heap / ours, "(reference)", None)  # fmt: skip
    rounds = [
        (_rocks(_ours_batched, records), _in_tmp(lambda p: _raw_batched(records, p))) for _ in range(runs)
    ]
    ours_u, raw_u, ratio_u = paired(rounds)
    yield Result("P9", "batched updates ops/s (set_current_key + update in write_batch())", ours_u,
                 "ops/s", "raw rocksdict WriteBatch of 1000, same writes", raw_u, ratio_u, ">= 0.7x",
                 ratio_u >= 0.7)  # fmt: skip
    rounds = [
        (_in_tmp(lambda p: _ceiling_batched(records, p)), _in_tmp(lambda p: _raw_batched(records, p)))
        for _ in range(runs)
    ]
    ceiling, raw_c, ratio_c = paired(rounds)
    yield Result("P9C", "set_current_key + key bytes into raw WriteBatches", ceiling, "ops/s",
                 "raw rocksdict WriteBatch of 1000, same writes", raw_c, ratio_c, "(ceiling)",
                 None)  # fmt: skip
    lists = _records(n_keys // 50, n_keys)  # about 50 elements per list
    rounds = [
        (_rocks(_ours_list_adds, lists), _in_tmp(lambda p: _raw_list_rewrites(lists, p))) for _ in range(runs)
    ]
    ours_l, raw_l, ratio_l = paired(rounds)
    yield Result("P9L", "ListState.add ops/s, one entry per element", ours_l, "ops/s",
                 "raw rocksdict read-append-rewrite of a serialized list", raw_l, ratio_l, "(layout choice)",
                 None)  # fmt: skip
    yield from _memory(1_000_000 if quick else 10_000_000)


_FILL = """
import resource, sys, tempfile
from flinkstate.state import HeapKeyedStateBackend, RocksDBKeyedStateBackend, Types, ValueStateDescriptor
kind, n = sys.argv[1], int(sys.argv[2])
if kind == "heap":
    b = HeapKeyedStateBackend(key_type=Types.LONG())
else:
    b = RocksDBKeyedStateBackend(tempfile.mkdtemp(dir=sys.argv[3]) + "/db", key_type=Types.LONG())
s = b.get_state(ValueStateDescriptor("v", Types.LONG()))
for k in range(n):
    b.set_current_key(k)
    s.update(k)
b.set_current_key(n // 2)
assert s.value() == n // 2
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
b.close()
"""


def _peak_rss(kind: str, n: int) -> int:
    root = tempfile.mkdtemp(prefix="p9-rss-")
    try:
        out = subprocess.run(
            [sys.executable, "-c", _FILL, kind, str(n), root], capture_output=True, text=True, check=True
        )
        return int(out.stdout.strip())
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _memory(n: int) -> Iterator[Result]:
    rocks, heap = _peak_rss("rocksdb", n), _peak_rss("heap", n)
    yield Result("P9", f"peak RSS, {n:,} value entries, RocksDB backend", rocks / 2**20, "MiB",
                 "heap backend, same entries", heap / 2**20, heap / rocks, "(reference)", None)  # fmt: skip


BENCHMARKS = {"P9": p9}
