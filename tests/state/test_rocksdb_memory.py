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
