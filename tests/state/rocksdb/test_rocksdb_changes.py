"""What only RocksDB's change recording has: the compaction-style TTL sweep, range deletes,
write batches and the folding of entry keys into scopes (the contract: keyed/test_changes.py)."""

from __future__ import annotations

import datetime
from pathlib import Path

from recorded_changes import changes

from flinkstate.state import (
    KeyGroupRange,
    ListStateDescriptor,
    MapStateDescriptor,
    RocksDBKeyedStateBackend,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.rocksdb.changes import FOLD_AT
from flinkstate.state.serializers.lookup import serializer_for
from flinkstate.state.ttl import ManualTimeProvider

VALUE = ValueStateDescriptor("v", Types.LONG())


def _long(value: int) -> bytes:
    return serializer_for(Types.LONG()).to_bytes(value)


def _confirmed(backend: RocksDBKeyedStateBackend, checkpoint_id: int) -> None:
    with backend.snapshot_for_checkpoint(checkpoint_id) as snap:
        assert snap.changes is not None
        snap.changes.confirm(checkpoint_id)


def test_expiry_by_the_compaction_sweep_is_a_change(tmp_path: Path) -> None:
    clock = ManualTimeProvider(1_000)
    ttl = StateTtlConfig.new_builder(datetime.timedelta(seconds=1)).cleanup_in_rocksdb_compact_filter(50)
    desc = ValueStateDescriptor("ttl", Types.STRING())
    desc.enable_time_to_live(ttl.build())
    listed = ListStateDescriptor("ttl_list", Types.LONG())
    listed.enable_time_to_live(ttl.build())
    with RocksDBKeyedStateBackend(tmp_path / "db", time_provider=clock) as b:
        state, elements = b.get_state(desc), b.get_list_state(listed)
        for k in range(200):
            b.set_current_key(k)
            state.update(f"é{k}")
            elements.add(k)
        _confirmed(b, 1)
        clock.advance(1_500)
        b.set_current_key(-1)
        for i in range(300):  # writes to one key drive the sweep over entries nobody reads
            state.update(str(i))
        with b.snapshot_for_checkpoint(2) as snap:
            upserts, deletes = changes(snap, "ttl")
            assert upserts == {(-1, None): "299"}
            assert deletes == {(k, None) for k in range(200)}  # every one swept
            assert changes(snap, "ttl_list") == ({}, set())  # not swept yet: no change
            snap.changes.confirm(2)  # type: ignore[union-attr]
        assert b.compact_expired("ttl_list") == 200  # a whole pass, on demand
        with b.snapshot_for_checkpoint(3) as snap:
            assert changes(snap, "ttl_list") == ({}, {(k, None) for k in range(200)})
            assert changes(snap, "ttl") == ({}, set())


def test_dropped_key_groups_are_deletes(tmp_path: Path) -> None:
    names = MapStateDescriptor("m", Types.STRING(), Types.LONG())
    with RocksDBKeyedStateBackend(tmp_path / "db", max_parallelism=8) as b:
        for k in range(60):
            b.set_current_key(k)
            b.get_state(VALUE).update(k)
            b.get_partitioned_state("ns", names).put_all({"a": 1, "b": k})
        _confirmed(b, 1)
        b.drop_key_groups(KeyGroupRange(2, 5))
        dropped = {k for k in range(60) if assign_to_key_group(k, 8) in range(2, 6)}
        with b.snapshot_for_checkpoint(2) as snap:
            assert changes(snap, "v") == ({}, {(k, None) for k in dropped})
            assert changes(snap, "m") == ({}, {(k, "ns") for k in dropped})


def test_writes_buffered_in_a_write_batch_are_recorded(tmp_path: Path) -> None:
    with RocksDBKeyedStateBackend(tmp_path / "db") as b:
        state = b.get_state(VALUE)
        _confirmed(b, 1)
        with b.write_batch(max_entries=1000):
            for k in range(10):
                b.set_current_key(k)
                state.update(k * 2)
            with b.snapshot_for_checkpoint(2) as snap:  # taken while writes wait in the batch
                b.set_current_key(0)
                state.update(-1)  # after the snapshot: the next epoch
                assert changes(snap, "v") == ({(k, None): k * 2 for k in range(10)}, set())
                snap.changes.confirm(2)  # type: ignore[union-attr]
        with b.snapshot_for_checkpoint(3) as snap:
            assert changes(snap, "v") == ({(0, None): -1}, set())


def test_list_appends_fold_into_one_scope(tmp_path: Path) -> None:
    """Every append is a new RocksDB key; the record folds them into their scope, so a hot
    list costs bounded memory between checkpoints."""
    with RocksDBKeyedStateBackend(tmp_path / "db") as b:
        b.set_current_key("k")
        elements = b.get_list_state(ListStateDescriptor("l", Types.LONG()))
        elements.add(-1)
        _confirmed(b, 1)
        for i in range(150_000):
            elements.add(i)
        col = b._columns["l"]
        assert col.changed is not None and len(col.changed) < 1 << 16 and len(col._scopes) == 1
        with b.snapshot_for_checkpoint(2) as snap:
            assert changes(snap, "l") == ({("k", None): [-1, *range(150_000)]}, {("k", None)})


def test_distinct_keys_fold_less_often_with_bounded_memory(tmp_path: Path) -> None:
    """A run of distinct keys is folded only when the raw list outgrows twice the scopes
    kept (so most are deduplicated by the checkpoint, not by update()); the list stays
    within that bound, and the record is exact: every key once, repeats included."""
    n = 300_000
    with RocksDBKeyedStateBackend(tmp_path / "db") as b:
        state = b.get_state(VALUE)
        _confirmed(b, 1)
        col = b._columns["v"]
        longest = 0
        for k in range(n):
            b.set_current_key(k % 250_000)  # the last 50,000 repeat earlier keys
            state.update(k)
            assert col.changed is not None
            longest = max(longest, len(col.changed))
            assert len(col.changed) <= max(FOLD_AT, 2 * len(col._scopes)) + 1
        assert len(col._scopes) < 250_000  # the tail is still raw, unfolded
        assert longest > FOLD_AT + 1  # a fold waited for twice the scopes
        with b.snapshot_for_checkpoint(2) as snap:
            expected = {(k, None): k for k in range(n - 250_000, 250_000)}
            expected.update({(k % 250_000, None): k for k in range(250_000, n)})
            assert changes(snap, "v") == (expected, set())


def test_two_byte_key_groups_of_a_range(tmp_path: Path) -> None:
    """Above 128 key groups a key group is 2 bytes; changes land in their key group's index."""
    rng = KeyGroupRange(300, 699)
    keys = [k for k in range(3_000) if assign_to_key_group(k, 1000) in rng][:200]
    with RocksDBKeyedStateBackend(tmp_path / "db", max_parallelism=1000, key_group_range=rng) as b:
        state = b.get_partitioned_state(2, VALUE)
        for k in keys:
            b.set_current_key(k)
            state.update(k)
        _confirmed(b, 1)
        for k in keys[::3]:
            b.set_current_key(k)
            state.update(-k)
        with b.snapshot_for_checkpoint(2) as snap:
            assert snap.changes is not None
            for k in keys[::3]:  # each prefix in its own key group's index, which it starts with
                kg = assign_to_key_group(k, 1000)
                assert kg.to_bytes(2, "big") + _long(k) + b"\x01" + _long(2) in snap.changes.changed(
                    "v", kg - 300
                )
            assert changes(snap, "v") == ({(k, 2): -k for k in keys[::3]}, set())
