"""Native snapshots of the RocksDB backend: a RocksDB checkpoint in a directory of the
snapshot's own, its SST files described by column family and key groups."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import rocksdict

from flinkstate.state import (
    KeyGroupRange,
    ListStateDescriptor,
    MapStateDescriptor,
    RocksDBKeyedStateBackend,
    StateAccessError,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.rocksdb import native


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


def _filled(path: Path, flushes: int) -> RocksDBKeyedStateBackend:
    """A backend with a value, a list and a map state over all key groups, flushed into
    several SST files per column family."""
    b = RocksDBKeyedStateBackend(path, Types.STRING(), 128)
    for round_ in range(flushes):
        for k in range(round_, 2000, flushes):
            b.set_current_key(f"ключ{k}")
            b.get_state(ValueStateDescriptor("v", Types.LONG())).update(k)
            b.get_list_state(ListStateDescriptor("l", Types.STRING())).add("" if k % 9 == 0 else str(k))
            b.get_map_state(MapStateDescriptor("m", Types.INT(), Types.STRING())).put(k % 5, "é")
        for state in ("v", "l", "m"):
            b._columns[state].view().flush()
    return b


def test_files_described_by_the_live_db_are_as_the_checkpoint_describes_them(tmp_path: Path) -> None:
    """A snapshot's files are described from the live DB's metadata: exactly what opening
    the checkpoint itself gives (column families, key groups, entries, sizes)."""
    with _filled(tmp_path / "db", 3) as b:
        snap = b.native_snapshot()
        ssts = [f for f in snap.files if f.sst]
        assert len(ssts) >= 9 and all(f.column_families and f.key_groups for f in ssts)
        assert snap.files == native._describe(snap.directory, b._key_codec.width)
        snap.release()


def test_a_file_compacted_away_is_described_from_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the live DB compacted a checkpoint's file away before it was described, the
    description comes from the checkpoint itself, the same as it would have been."""
    with _filled(tmp_path / "db", 4) as b:
        db, width = b._dir.db, b._key_codec.width
        target = str(tmp_path / "checkpoint")
        rocksdict.Checkpoint(db).create_checkpoint(target)
        want = native._describe(target, width)
        assert native._described(db, target, width) == want  # nothing compacted yet
        for state in ("v", "l", "m"):
            b._columns[state].view().compact_range(None, None)
        fallbacks = []
        describe = native._describe
        monkeypatch.setattr(native, "_describe", lambda d, w: (fallbacks.append(d), describe(d, w))[1])
        assert native._described(db, target, width) == want
        assert fallbacks == [target]


def test_an_sst_file_the_checkpoint_does_not_list_is_refused(tmp_path: Path) -> None:
    """A stray SST file in a checkpoint (its own metadata does not list it) is not uploaded
    as if it were part of it: describing the checkpoint fails with a stable code."""
    with _filled(tmp_path / "db", 2) as b:
        target = str(tmp_path / "checkpoint")
        rocksdict.Checkpoint(b._dir.db).create_checkpoint(target)
        some = next(n for n in os.listdir(target) if n.endswith(".sst"))
        shutil.copyfile(os.path.join(target, some), os.path.join(target, "999999.sst"))
        with pytest.raises(StateAccessError, match=r"\[DB_CHECKPOINT_FAILED\].*999999\.sst"):
            native._described(b._dir.db, target, b._key_codec.width)
