"""The RocksDB memory budget: the options reach RocksDB (read back from the DB), and a
backend writing many times its budget keeps RocksDB's memory within it."""

from __future__ import annotations

import configparser
import glob
import os
import random
from pathlib import Path

from flinkstate.state import RocksDBKeyedStateBackend, RocksDBOptions, Types, ValueStateDescriptor


def _cf_options(db: str) -> dict[str, dict[str, str]]:
    """Each column family's options, from the newest OPTIONS file RocksDB wrote."""
    newest = max(glob.glob(os.path.join(db, "OPTIONS-*")), key=lambda p: int(p.rsplit("-", 1)[1]))
    parser = configparser.ConfigParser(strict=False)
    parser.read(newest)
    prefix = 'CFOptions "'
    return {s[len(prefix) : -1]: dict(parser[s]) for s in parser.sections() if s.startswith(prefix)}


def test_options_reach_rocksdb(tmp_path: Path) -> None:
    opts = RocksDBOptions(
        block_cache_bytes=24 << 20,
        write_buffer_bytes=3 << 20,
        max_write_buffers=5,
        total_write_buffer_bytes=6 << 20,
    )
    assert opts.memory_budget == 24 << 20
    with RocksDBKeyedStateBackend(tmp_path / "b", key_type=Types.LONG(), options=opts) as b:
        for name in ("a", "b"):
            b.set_current_key(1)
            b.get_state(ValueStateDescriptor(name, Types.LONG())).update(1)
        col = b._columns["a"]
        assert col.view().property_int_value("rocksdb.block-cache-capacity") == 24 << 20
        states = {n: o for n, o in _cf_options(os.path.join(b.path, "db")).items() if n != "default"}
        assert len(states) == 2
        for cf in states.values():
            assert int(cf["write_buffer_size"]) == 3 << 20
            assert int(cf["max_write_buffer_number"]) == 5


def test_memory_stays_within_the_budget_while_writing_many_times_it(tmp_path: Path) -> None:
    budget = 4 << 20
    opts = RocksDBOptions(
        block_cache_bytes=budget, write_buffer_bytes=1 << 20, total_write_buffer_bytes=2 << 20
    )
    desc = ValueStateDescriptor("v", Types.STRING())
    with RocksDBKeyedStateBackend(tmp_path / "b", key_type=Types.LONG(), options=opts) as b:
        state = b.get_state(desc)
        usage = []
        rnd = random.Random(1)
        with b.write_batch():
            for k in range(40_000):  # ~20 MiB of values that do not compress: five times the budget
                b.set_current_key(k)
                state.update(rnd.randbytes(250).hex())
                if k % 5_000 == 0:
                    usage.append(b.memory_usage())
        usage.append(b.memory_usage())
        assert b.disk_usage("v") > 4 * budget
        assert 1 << 20 < max(usage) <= budget * 1.05, usage  # memtables are charged to the cache


def test_a_backend_opened_for_another_shares_its_memory(tmp_path: Path) -> None:
    """``memory_of``: the second backend's memtables are charged to the first one's cache
    (one budget for both); a backend without it has a cache of its own."""
    opts = RocksDBOptions(
        block_cache_bytes=8 << 20, write_buffer_bytes=1 << 20, total_write_buffer_bytes=4 << 20
    )
    desc = ValueStateDescriptor("v", Types.STRING())
    rnd = random.Random(2)
    with (
        RocksDBKeyedStateBackend(tmp_path / "a", key_type=Types.LONG(), options=opts) as a,
        RocksDBKeyedStateBackend(tmp_path / "b", key_type=Types.LONG(), options=opts, memory_of=a) as b,
        RocksDBKeyedStateBackend(tmp_path / "c", key_type=Types.LONG(), options=opts) as c,
    ):
        assert b.memory is a.memory and c.memory is not a.memory
        before = a.memory_usage(), c.memory_usage()
        state = b.get_state(desc)
        for k in range(2_000):  # ~1 MiB of values in b's memtables
            b.set_current_key(k)
            state.update(rnd.randbytes(250).hex())
        assert a.memory_usage() >= before[0] + (512 << 10)
        assert b.memory_usage() == a.memory_usage()
        assert c.memory_usage() < before[1] + (256 << 10)
