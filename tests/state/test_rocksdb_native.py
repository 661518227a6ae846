"""Native snapshots of the RocksDB backend: a RocksDB checkpoint in a directory of the
snapshot's own, its SST files described by column family and key groups."""

from __future__ import annotations

import os
from pathlib import Path

from flinkstate.state import (
    KeyGroupRange,
    ListStateDescriptor,
    RocksDBKeyedStateBackend,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)


def test_snapshot_files_are_the_snapshots_own(tmp_path: Path) -> None:
    rng = KeyGroupRange(10, 60)
    with RocksDBKeyedStateBackend(tmp_path / "db", Types.LONG(), 128, rng) as b:
        keys = [k for k in range(3000) if assign_to_key_group(k, 128, Types.LONG()) in rng]
        for k in keys:
            b.set_current_key(k)
            b.get_state(ValueStateDescriptor("v", Types.LONG())).update(k)
            b.get_list_state(ListStateDescriptor("l", Types.STRING())).add(str(k))
        snap = b.native_snapshot()
        assert os.path.dirname(snap.directory) == b.path and os.path.isdir(snap.directory)
        ssts = [f for f in snap.files if f.sst]
        assert {cf for f in ssts for cf in f.column_families} == set(snap.columns.values()) == {"s1", "s2"}
        groups = {assign_to_key_group(k, 128, Types.LONG()) for k in keys}
        assert min(f.key_groups[0] for f in ssts if f.key_groups) == min(groups)
        assert max(f.key_groups[1] for f in ssts if f.key_groups) == max(groups)
        assert sum(f.entries for f in ssts) == 2 * len(keys)
        assert snap.sequences == {"l": len(keys)}
        for k in keys[:10]:  # writes go on; the snapshot's files do not change
            b.set_current_key(k)
            b.get_state(ValueStateDescriptor("v", Types.LONG())).update(-k)
        assert all(os.path.getsize(snap.path(f.name)) == f.size for f in snap.files)
        digest = snap.digest(ssts[0].name)
        assert b.native_snapshot().digests[ssts[0].name] == digest  # hashed once per DB
        snap.release()
        assert not os.path.exists(snap.path(""))


def test_a_snapshot_left_by_a_killed_process_is_cleared_on_open(tmp_path: Path) -> None:
    b = RocksDBKeyedStateBackend(tmp_path / "db", Types.LONG())
    b.set_current_key(1)
    b.get_state(ValueStateDescriptor("v", Types.LONG())).update(1)
    left = b.native_snapshot().directory  # never released
    b.close()
    assert os.path.isdir(left)
    with RocksDBKeyedStateBackend(tmp_path / "db", Types.LONG()):
        assert not os.path.exists(left)
