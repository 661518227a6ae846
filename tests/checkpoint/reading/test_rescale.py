"""Restoring at other parallelisms: keyed state by key group, operator and raw state by mode."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import (
    LIST,
    OFFSETS,
    RULES,
    SOURCES,
    VALUE,
    contents,
    fill,
    operator_backend,
    subtask_backend,
    written,
)

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.state import (
    HeapKeyedStateBackend,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index as key_groups_of
from flinkstate.state.ttl import ManualTimeProvider

KEYS = range(2000)


def _write_at(root: str, options: dict[str, Any], p: int, checkpoint: Any = None, max_p: int = 128) -> None:
    """Subtasks of parallelism ``p``: fresh state, or ``checkpoint`` restored at ``p``."""
    pending = CheckpointStorage(root, options).begin()
    for i in range(p):
        if checkpoint is None:
            keyed, ops = fill(subtask_backend(max_p, key_groups_of(max_p, p, i)), KEYS), operator_backend(i)
        else:
            keyed, ops = checkpoint.keyed_backend("op", i, p), checkpoint.operator_backend("op", i, p)
        pending.write_subtask("op", i, p, max_p, keyed=keyed, operator=ops,
                              raw_keyed={kg: f"raw-{kg}".encode() for kg in keyed.key_group_range},
                              raw_operator=[f"blob-{i}-{j}".encode() for j in range(2)])  # fmt: skip
    pending.commit()


def _union(checkpoint: Any, p: int) -> dict[tuple[str, Any, Any], Any]:
    out: dict[tuple[str, Any, Any], Any] = {}
    for i in range(p):
        part = contents(checkpoint.keyed_backend("op", i, p))
        assert not set(part) & set(out), "an entry restored by two subtasks"
        out.update(part)
    return out


@pytest.mark.parametrize("new_p", [1, 2, 5, 7])
def test_keyed_state_rescales_and_back(location: tuple[str, dict[str, Any]], new_p: int) -> None:
    root, options = location
    _write_at(root, options, 3)
    assert _union(open_checkpoint(root, options), new_p) == written(KEYS)
    _write_at(root, options, new_p, open_checkpoint(root, options))  # rescaled, checkpointed again
    _write_at(root, options, 3, open_checkpoint(root, options))  # and back
    final = open_checkpoint(root, options)
    assert final.manifest.operators[0].parallelism == 3
    assert _union(final, 3) == written(KEYS)


@pytest.mark.parametrize("new_p", [1, 2, 5, 7])
def test_operator_and_raw_state_redistribute(tmp_path: Path, new_p: int) -> None:
    root = str(tmp_path / "root")
    _write_at(root, {}, 3)
    checkpoint = open_checkpoint(root)
    backends = [checkpoint.operator_backend("op", i, new_p) for i in range(new_p)]
    split = [list(b.get_list_state(OFFSETS).get()) for b in backends]
    everything = sorted(e for s in range(3) for e in list(operator_backend(s).get_list_state(OFFSETS).get()))
    assert sorted(e for part in split for e in part) == everything  # each element exactly once
    assert max(map(len, split)) - min(map(len, split)) <= 1
    for b in backends:
        assert sorted(b.get_union_list_state(SOURCES).get()) == ["source-0", "source-1", "source-2"]
        assert dict(b.get_broadcast_state(RULES).items()) == {"a": "1", "b": "2"}
    raw = [checkpoint.raw_keyed("op", i, new_p) for i in range(new_p)]
    for i, part in enumerate(raw):
        assert set(part) == set(key_groups_of(128, new_p, i))
        assert all(data == f"raw-{kg}".encode() for kg, data in part.items())
    blobs = [checkpoint.raw_operator("op", i, new_p) for i in range(new_p)]
    assert sorted(b for part in blobs for b in part) == sorted(
        f"blob-{i}-{j}".encode() for i in range(3) for j in range(2)
    )


def test_partial_restore_reads_only_its_key_groups(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    _write_at(root, {}, 3)
    full = open_checkpoint(root)
    full.keyed_backend("op", 0, 1)
    part = open_checkpoint(root)
    backend = part.keyed_backend("op", 3, 4)  # the last quarter: only subtask 2's files hold it
    assert part.directory.files_opened < full.directory.files_opened
    # a quarter of the key groups (file footers weigh on data this small; P5 measures at scale)
    assert part.directory.bytes_read < 0.6 * full.directory.bytes_read
    keys = set(backend.get_keys("value"))
    assert keys and all(assign_to_key_group(k, 128) in key_groups_of(128, 4, 3) for k in keys)


def test_snapshot_is_frozen_while_the_write_runs(tmp_path: Path) -> None:
    for async_snapshots in (True, False):
        root = str(tmp_path / f"root-{async_snapshots}")
        backend = fill(HeapKeyedStateBackend(key_type=Types.LONG(), async_snapshots=async_snapshots), KEYS)
        pending = CheckpointStorage(root).begin()
        future = pending.write_keyed("op", backend)
        for k in KEYS:  # writes after the synchronous part: not in the checkpoint
            backend.set_current_key(k)
            backend.get_state(VALUE).update(-1)
            backend.get_list_state(LIST).add("late")
        future.result()
        pending.commit()
        assert contents(open_checkpoint(root).keyed_backend("op", 0, 1)) == written(KEYS)


def test_ttl_timestamps_and_full_snapshot_cleanup(tmp_path: Path) -> None:
    clock = ManualTimeProvider(1_000_000)
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), time_provider=clock)
    keep = ValueStateDescriptor("keep", Types.LONG())
    keep.enable_time_to_live(StateTtlConfig.new_builder(datetime.timedelta(seconds=10)).build())
    drop = ValueStateDescriptor("drop", Types.LONG())
    drop.enable_time_to_live(
        StateTtlConfig.new_builder(datetime.timedelta(seconds=10)).cleanup_full_snapshot().build()
    )
    for k in range(100):
        clock.now = 1_000_000 + k * 100
        backend.set_current_key(k)
        backend.get_state(keep).update(k)
        backend.get_state(drop).update(k)
    clock.now = 1_000_000 + 15_000  # keys 0..50 have expired (written at or before 1_005_000)
    pending = CheckpointStorage(str(tmp_path / "root")).begin()
    pending.write_keyed("op", backend)
    pending.commit()
    restored = open_checkpoint(str(tmp_path / "root")).keyed_backend("op", 0, 1, time_provider=clock)
    assert len(list(restored.get_keys("keep"))) == 100
    assert sorted(restored.get_keys("drop")) == list(range(51, 100))
    restored.set_current_key(70)
    assert restored.get_state(keep).value() == 70
    clock.now += 5_000  # key 70 was written at 1_007_000: expired at 1_017_000
    assert restored.get_state(keep).value() is None
