"""What only the RocksDB backend has: its key layout on disk, directory ownership and
lifecycle, the compaction-style TTL sweep, memory bounded by RocksDB, typed errors."""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flinkstate.state import (
    FlinkStateError,
    KeyGroupRange,
    ListStateDescriptor,
    MapStateDescriptor,
    RocksDBKeyedStateBackend,
    RocksDBOptions,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.serializers.lookup import serializer_for
from flinkstate.state.ttl import ManualTimeProvider


def raw_entries(backend: RocksDBKeyedStateBackend, state: str) -> list[tuple[bytes, bytes]]:
    col = backend._columns[state]
    return list(col.cf.items())


def test_key_layout_is_flinks(tmp_path: Path) -> None:
    with RocksDBKeyedStateBackend(tmp_path / "db", max_parallelism=128) as b:
        b.get_map_state(MapStateDescriptor("m", Types.STRING(), Types.LONG()))
        b.set_current_key("k")
        b.get_partitioned_state(7, MapStateDescriptor("m", Types.STRING(), Types.LONG())).put("u", 5)
        kg = assign_to_key_group("k", 128)
        string, long = serializer_for(Types.STRING()), serializer_for(Types.LONG())
        expected = bytes([kg]) + string.to_bytes("k") + b"\x01" + long.to_bytes(7) + string.to_bytes("u")
        assert raw_entries(b, "m") == [(expected, b"\x01" + long.to_bytes(5))]
    with RocksDBKeyedStateBackend(tmp_path / "db2", max_parallelism=1000) as b:
        b.set_current_key(42)
        b.get_state(ValueStateDescriptor("v", Types.LONG())).update(1)
        kg = assign_to_key_group(42, 1000)
        [(key, _)] = raw_entries(b, "v")
        assert key == kg.to_bytes(2, "big") + long.to_bytes(42) + b"\x00"  # 2-byte key group


def test_list_appends_one_entry_each(tmp_path: Path) -> None:
    with RocksDBKeyedStateBackend(tmp_path / "db") as b:
        state = b.get_list_state(ListStateDescriptor("l", Types.STRING()))
        b.set_current_key(1)
        for i in range(5):
            state.add(str(i))
        assert len(raw_entries(b, "l")) == 5
        assert list(state.get()) == ["0", "1", "2", "3", "4"]


def test_drop_key_groups_is_a_range_delete(tmp_path: Path) -> None:
    with RocksDBKeyedStateBackend(tmp_path / "db", max_parallelism=8) as b:
        state = b.get_state(ValueStateDescriptor("v", Types.LONG()))
        for k in range(100):
            b.set_current_key(k)
            state.update(k)
        b.drop_key_groups(KeyGroupRange(2, 5))
        assert sorted(b.get_keys("v")) == [
            k for k in range(100) if assign_to_key_group(k, 8) not in range(2, 6)
        ]


def test_values_are_serialized_on_write(tmp_path: Path) -> None:
    with RocksDBKeyedStateBackend(tmp_path / "db") as b:
        state = b.get_state(ValueStateDescriptor("v", Types.INT()))
        b.set_current_key(1)
        for bad in (2**31, "x", True):
            with pytest.raises(FlinkStateError, match="SERIALIZATION"):
                state.update(bad)
        assert state.value() is None


def test_one_open_backend_per_directory(tmp_path: Path) -> None:
    path = tmp_path / "db"
    first = RocksDBKeyedStateBackend(path)
    with pytest.raises(FlinkStateError, match="DB_DIRECTORY_IN_USE") as err:
        RocksDBKeyedStateBackend(path)
    assert str(path) in str(err.value)
    code = f"from flinkstate.state import RocksDBKeyedStateBackend as R; R({str(path)!r})"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert other.returncode != 0 and "DB_DIRECTORY_IN_USE" in other.stderr
    first.close()
    RocksDBKeyedStateBackend(path).close()  # close() released every handle and the lock


def test_close_releases_the_db_with_snapshots_and_states_alive(tmp_path: Path) -> None:
    path = tmp_path / "db"
    b = RocksDBKeyedStateBackend(path)
    state = b.get_state(ValueStateDescriptor("v", Types.LONG()))
    b.set_current_key(1)
    state.update(1)
    snap = b.snapshot()
    keys = b.get_keys("v")
    next(iter(keys), None)
    b.close()
    with pytest.raises(FlinkStateError, match="SNAPSHOT_RELEASED"):
        snap.states["v"].columns(0)
    with pytest.raises(FlinkStateError, match="BACKEND_CLOSED"):
        state.value()
    RocksDBKeyedStateBackend(path).close()


def test_directory_of_a_killed_process_opens_again(tmp_path: Path) -> None:
    path = tmp_path / "db"
    code = (
        "import sys, time\n"
        "from flinkstate.state import RocksDBKeyedStateBackend, ValueStateDescriptor, Types\n"
        f"b = RocksDBKeyedStateBackend({str(path)!r})\n"
        "s = b.get_state(ValueStateDescriptor('v', Types.LONG()))\n"
        "for k in range(1000):\n"
        "    b.set_current_key(k); s.update(k)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    with RocksDBKeyedStateBackend(path) as b:  # working state is discarded: it starts empty
        assert b.state_names() == []
        b.set_current_key(1)
        b.get_state(ValueStateDescriptor("v", Types.LONG())).update(5)


def test_foreign_and_corrupt_directories_are_typed_errors(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("user data")
    with pytest.raises(FlinkStateError, match="FOREIGN_DB_DIRECTORY"):
        RocksDBKeyedStateBackend(foreign)
    assert (foreign / "precious.txt").read_text() == "user data"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(FlinkStateError, match="INVALID_DB_DIRECTORY"):
        RocksDBKeyedStateBackend(a_file)
    ours = tmp_path / "ours"
    RocksDBKeyedStateBackend(ours).close()
    (ours / "FLINKSTATE_ROCKSDB").write_bytes(b"\xff\x00garbage")
    with pytest.raises(FlinkStateError, match="CORRUPT_DB_DIRECTORY"):
        RocksDBKeyedStateBackend(ours)
    RocksDBKeyedStateBackend(ours / "inner").close()  # the failed opens left no lock behind


def test_options_are_parsed_once_and_checked() -> None:
    opts = RocksDBOptions.from_mapping({"block_cache_bytes": "1048576", "disable_wal": "false"})
    assert opts.block_cache_bytes == 1 << 20 and opts.disable_wal is False
    with pytest.raises(FlinkStateError, match=r"INVALID_OPTION.*block_cach"):
        RocksDBOptions.from_mapping({"block_cach": 1})
    with pytest.raises(FlinkStateError, match="INVALID_OPTION"):
        RocksDBOptions(write_buffer_bytes=0)


def test_ttl_compaction_sweep_shrinks_the_files(tmp_path: Path) -> None:
    clock = ManualTimeProvider(1_000)
    ttl = StateTtlConfig.new_builder(datetime.timedelta(seconds=1)).cleanup_in_rocksdb_compact_filter(500)
    desc = ValueStateDescriptor("v", Types.STRING())
    desc.enable_time_to_live(ttl.build())
    lst = ListStateDescriptor("l", Types.LONG())
    lst.enable_time_to_live(ttl.build())
    with RocksDBKeyedStateBackend(tmp_path / "db", time_provider=clock) as b:
        state, elements = b.get_state(desc), b.get_list_state(lst)
        for k in range(30_000):
            b.set_current_key(k)
            state.update("x" * 50 + str(k))
            if k % 100 == 0:
                elements.add(k)
        b.flush()
        peak = b.disk_usage("v")
        assert peak > 300_000
        clock.advance(500)
        b.set_current_key(0)
        elements.add(-1)  # one fresh element in a list whose first element will expire
        clock.advance(600)
        b.set_current_key(-1)
        for i in range(40_000):  # writes to one key drive the sweep over entries nobody reads
            state.update(str(i))
        b.flush()
        assert b.disk_usage("v") < peak / 5
        assert sorted(b.get_keys("v")) == [-1]
        assert b.compact_expired() >= 300  # the list state's sweep, run whole
        b.set_current_key(0)
        assert list(elements.get()) == [-1]
        assert sorted(b.get_keys("l")) == [0]


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
def test_state_five_times_the_memory_budget(tmp_path: Path) -> None:
    """A 16 MiB RocksDB budget, ~100 MiB of state: Python's heap stays flat while writing
    and reading it all, and the process grows by much less than the state."""
    import tracemalloc

    budget = 16 << 20
    opts = RocksDBOptions(
        block_cache_bytes=budget, write_buffer_bytes=4 << 20, total_write_buffer_bytes=8 << 20
    )
    n, width = 60_000, 1500
    desc = ValueStateDescriptor("v", Types.STRING())
    with RocksDBKeyedStateBackend(tmp_path / "db", options=opts) as b:
        state = b.get_state(desc)
        rss0 = _rss()
        tracemalloc.start()
        try:
            samples = []
            for k in range(n):
                b.set_current_key(k)
                state.update(f"{k:0{width}d}")
                if k % 15_000 == 0:
                    samples.append(tracemalloc.get_traced_memory()[0])
            for k in range(n):
                b.set_current_key(k)
                assert state.value() == f"{k:0{width}d}"
            samples.append(tracemalloc.get_traced_memory()[0])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        b.flush()
        on_disk_input = n * width
        assert on_disk_input >= 5 * budget
        assert max(samples) - min(samples) < 1 << 20  # the Python heap does not grow with the state
        assert peak < 4 << 20
        assert _rss() - rss0 < on_disk_input / 2, (_rss() - rss0) / 2**20


def test_declared_backend_choice(tmp_path: Path) -> None:
    from flinkstate.state import HeapKeyedStateBackend, make_keyed_backend

    heap = make_keyed_backend("heap", max_parallelism=8)
    assert isinstance(heap, HeapKeyedStateBackend)
    rocks: Any = make_keyed_backend("rocksdb", path=str(tmp_path / "db"), max_parallelism=8)
    assert isinstance(rocks, RocksDBKeyedStateBackend) and rocks.max_parallelism == 8
    rocks.close()
    with pytest.raises(FlinkStateError, match="INVALID_OPTION"):
        make_keyed_backend("lmdb")
    with pytest.raises(FlinkStateError, match="INVALID_OPTION"):
        make_keyed_backend("rocksdb")  # a directory is required
