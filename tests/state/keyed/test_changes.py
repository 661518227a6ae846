"""The change-recording contract (incremental checkpoints), on every keyed backend."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from recorded_changes import changes

from flinkstate.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.ttl.time import ManualTimeProvider

VALUE = ValueStateDescriptor("value", Types.LONG())
LIST = ListStateDescriptor("list", Types.STRING())
MAP = MapStateDescriptor("map", Types.STRING(), Types.LONG())


def test_recording_starts_at_the_first_checkpoint(make_backend: Any) -> None:
    backend = make_backend(key_type=Types.LONG())
    backend.set_current_key(1)
    backend.get_state(VALUE).update(10)
    with backend.snapshot_for_checkpoint(1) as first:
        assert first.changes is not None and first.changes.base is None  # nothing to build on
        first.changes.confirm(1)
    backend.set_current_key(2)
    backend.get_state(VALUE).update(20)
    with backend.snapshot_for_checkpoint(2) as second:
        assert second.changes is not None and second.changes.base == 1
        assert changes(second, "value") == ({(2, None): 20}, set())


def test_every_kind_of_write_is_recorded(make_backend: Any) -> None:
    backend = make_backend(key_type=Types.STRING())
    for key in "abcd":
        backend.set_current_key(key)
        backend.get_state(VALUE).update(1)
        backend.get_list_state(LIST).add("x")
        backend.get_map_state(MAP).put_all({"p": 1, "q": 2})
    backend.snapshot_for_checkpoint(1).changes.confirm(1)  # type: ignore[union-attr]
    backend.set_current_key("a")
    backend.get_state(VALUE).update(None)
    backend.get_list_state(LIST).add("y")
    backend.get_map_state(MAP).remove("p")
    backend.set_current_key("b")
    backend.get_state(VALUE).update(5)
    backend.get_list_state(LIST).clear()
    backend.get_map_state(MAP).remove("nothing")  # no change
    backend.get_partitioned_state(7, VALUE).update(70)
    backend.set_current_key("c")
    backend.get_map_state(MAP).clear()
    backend.get_state(VALUE).value()  # reads are no change
    with backend.snapshot_for_checkpoint(2) as snap:
        assert changes(snap, "value") == ({("b", None): 5, ("b", 7): 70}, {("a", None)})
        # lists and maps are replaced whole: their scope is deleted, then written again
        assert changes(snap, "list") == ({("a", None): ["x", "y"]}, {("a", None), ("b", None)})
        assert changes(snap, "map") == ({("a", None): {"q": 2}}, {("a", None), ("c", None)})


def test_unconfirmed_changes_stay_and_later_writes_wait(make_backend: Any) -> None:
    backend = make_backend(key_type=Types.LONG())
    backend.snapshot_for_checkpoint(1).changes.confirm(1)  # type: ignore[union-attr]
    backend.set_current_key(1)
    backend.get_state(VALUE).update(1)
    failed = backend.snapshot_for_checkpoint(2)  # never confirmed: an aborted checkpoint
    backend.get_state(VALUE).update(2)  # after the snapshot: not in it
    backend.set_current_key(3)
    backend.get_state(VALUE).update(3)
    assert changes(failed, "value") == ({(1, None): 1}, set())
    failed.release()
    with backend.snapshot_for_checkpoint(3) as retry:
        assert retry.changes is not None and retry.changes.base == 1
        assert changes(retry, "value") == ({(1, None): 2, (3, None): 3}, set())
        retry.changes.confirm(3)
    with backend.snapshot_for_checkpoint(4) as after:
        assert after.changes is not None and after.changes.base == 3
        assert changes(after, "value") == ({}, set())


def test_a_commit_made_elsewhere_is_confirmed_by_id(make_backend: Any) -> None:
    backend = make_backend(key_type=Types.LONG())
    backend.snapshot_for_checkpoint(5).release()
    backend.notify_checkpoint_complete(5)
    with backend.snapshot_for_checkpoint(6) as snap:
        assert snap.changes is not None and snap.changes.base == 5


def test_expiry_by_incremental_cleanup_is_a_change(make_backend: Any) -> None:
    clock = ManualTimeProvider(1_000)
    backend = make_backend(key_type=Types.LONG(), time_provider=clock)
    ttl = ValueStateDescriptor("ttl", Types.LONG())
    ttl.enable_time_to_live(
        StateTtlConfig.new_builder(timedelta(milliseconds=10)).cleanup_incrementally(100, True).build()
    )
    for key in range(5):
        backend.set_current_key(key)
        backend.get_state(ttl).update(key)
    backend.snapshot_for_checkpoint(1).changes.confirm(1)  # type: ignore[union-attr]
    clock.advance(20)
    backend.set_current_key(0)  # the key listener runs the cleanup: every entry expired
    assert list(backend.get_keys("ttl")) == []
    with backend.snapshot_for_checkpoint(2) as snap:
        assert changes(snap, "ttl") == ({}, {(k, None) for k in range(5)})


def test_a_restore_starts_over(make_backend: Any) -> None:
    backend = make_backend(key_type=Types.LONG())
    backend.snapshot_for_checkpoint(1).changes.confirm(1)  # type: ignore[union-attr]
    backend.restore_state(_meta(), 0, StateColumns([], None, []))
    with backend.snapshot_for_checkpoint(2) as snap:
        assert snap.changes is not None and snap.changes.base is None


def _meta() -> Any:
    from flinkstate.state.descriptors import StateKind
    from flinkstate.state.keyed.snapshot import StateMetaInfo

    return StateMetaInfo("value", StateKind.VALUE, Types.LONG())


def test_heap_change_lists_drop_repeats() -> None:
    """A hot key written many times between checkpoints costs no growing memory."""
    from flinkstate.state import HeapKeyedStateBackend

    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    backend.set_current_key(1)
    state = backend.get_state(VALUE)
    state.update(0)
    backend.snapshot_for_checkpoint(1).release()
    for i in range(200_000):
        state.update(i)
    changed = backend.table("value").changes[backend.get_current_key_group() or 0]
    assert len(changed) < 1 << 16
    with backend.snapshot_for_checkpoint(2) as snap:
        assert changes(snap, "value") == ({(1, None): 199_999}, set())


def test_heap_change_lists_stay_bounded_and_exact() -> None:
    """Hot keys: a change list drops its repeats past COMPACT_AT. Many distinct ids in one key
    group: compaction moves its threshold up (not on every append); the record stays exact,
    through every write path (value fast path, the general path, lists and maps), whether
    it carries the state written or not."""
    from flinkstate.state import HeapKeyedStateBackend
    from flinkstate.state.heap.state_table import COMPACT_AT

    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=1)  # one key group
    value, items = backend.get_state(VALUE), backend.get_list_state(LIST)
    n = COMPACT_AT + COMPACT_AT // 2
    for k in range(n):
        backend.set_current_key(k)
        value.update(k)
    backend.snapshot_for_checkpoint(1).changes.confirm(1)  # type: ignore[union-attr]
    table = backend.table("value")
    backend.set_current_key(7)
    for i in range(2 * COMPACT_AT + 5):  # one hot key, through the fast path
        value.update(i)
        assert len(table.changes[0]) <= COMPACT_AT
    for _ in range(2):  # every key, twice: more distinct ids than COMPACT_AT
        for k in range(n):
            backend.set_current_key(k)
            value.update(-k if k % 3 else None)  # None: removes, through the general path
            items.add(str(k))
        assert len(table.changes[0]) <= 2 * 2 * n  # two list items (id, state) per write
    assert len(backend.table("list").changes[0]) <= 2 * 2 * n
    with backend.snapshot_for_checkpoint(2) as snap:
        upserts, deletes = changes(snap, "value")
        assert upserts == {(k, None): -k for k in range(n) if k % 3}
        assert deletes == {(k, None) for k in range(n) if not k % 3}
        list_upserts, _ = changes(snap, "list")
        assert list_upserts == {(k, None): [str(k), str(k)] for k in range(n)}
    backend.close()


def test_heap_record_carries_states_and_the_latest_write_wins() -> None:
    """Every write path records the state it leaves (the value fast path, a write while a
    snapshot is held) or None (a removal). Across an epoch whose checkpoint failed, the
    later record of an id wins, and the result is what a lookup of every id would give."""
    from flinkstate.state import HeapKeyedStateBackend

    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=1)
    value = backend.get_state(VALUE)
    for k in range(10):
        backend.set_current_key(k)
        value.update(k)
    with backend.snapshot_for_checkpoint(1) as first:
        first.changes.confirm(1)  # type: ignore[union-attr]
    for k in range(6):  # the fast path: no snapshot is held
        backend.set_current_key(k)
        value.update(100 + k)
    failed = backend.snapshot_for_checkpoint(2)  # never confirmed
    assert failed.changes is not None
    assert failed.changes.changed("value", 0) == {k: 100 + k for k in range(6)}
    for k in (0, 1):  # a snapshot is held: the general path
        backend.set_current_key(k)
        value.update(200 + k)
    backend.set_current_key(2)
    value.update(None)
    failed.release()
    for k in (0, 3):  # the fast path again
        backend.set_current_key(k)
        value.update(300 + k)
    with backend.snapshot_for_checkpoint(3) as snap:
        assert snap.changes is not None
        assert snap.changes.changed("value", 0) == {
            0: 300, 1: 201, 2: None, 3: 303, 4: 104, 5: 105
        }  # fmt: skip
        assert changes(snap, "value") == (
            {(0, None): 300, (1, None): 201, (3, None): 303, (4, None): 104, (5, None): 105},
            {(2, None)},
        )
    backend.close()


def test_heap_record_of_mutable_states_is_looked_up() -> None:
    """A mutable state is copied for a held snapshot when read, and a copy may be mutated
    in place: an increment then looks every recorded id up, and writes what a full
    checkpoint of the same moment holds (not the object the record kept)."""
    from flinkstate.state import HeapKeyedStateBackend

    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=1)
    items = backend.get_state(ValueStateDescriptor("items", Types.LIST(Types.LONG())))
    backend.set_current_key(1)
    items.update([0])
    with backend.snapshot_for_checkpoint(1) as first:
        first.changes.confirm(1)  # type: ignore[union-attr]
    items.update([1])  # the fast path: the record keeps this list
    held = backend.snapshot()
    items.value().append(2)  # copied for the held snapshot, then mutated in place
    held.release()
    with backend.snapshot_for_checkpoint(2) as snap:
        full = {(e.key, e.namespace): e.value for e in snap.states["items"].entries(0)}
        assert full == {(1, None): [1, 2]}
        assert changes(snap, "items") == (full, set())
    backend.close()


def test_a_committed_record_is_let_go() -> None:
    """Once its checkpoint commits, nothing keeps an epoch's record (it can be large)."""
    import gc
    import weakref

    from flinkstate.state import HeapKeyedStateBackend

    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=4)
    value = backend.get_state(VALUE)
    backend.snapshot_for_checkpoint(1).changes.confirm(1)  # type: ignore[union-attr]
    for k in range(100):
        backend.set_current_key(k)
        value.update(k)
    snap = backend.snapshot_for_checkpoint(2)
    assert snap.changes is not None
    record = weakref.ref(snap.changes.epochs[0]["value"])
    snap.changes.confirm(2)
    snap.release()
    del snap
    gc.collect()
    assert record() is None
    backend.close()
