"""The two heap state maps: incremental rehash, copy-on-write bookkeeping, cursors."""

from __future__ import annotations

from typing import Any

import pytest

from flinkstate.state.heap.cow_map import BUCKET_LOAD, CopyOnWriteStateMap
from flinkstate.state.heap.nested_map import NestedStateMap
from flinkstate.state.heap.state_map import StateMap

MAPS = {"cow": CopyOnWriteStateMap, "nested": NestedStateMap}


@pytest.fixture(params=sorted(MAPS))
def new_map(request: pytest.FixtureRequest) -> Any:
    return lambda copy=None: MAPS[request.param](copy)


def test_basic_operations(new_map: Any) -> None:
    m: StateMap = new_map()
    assert m.get(1, None) is None and not m.contains(1, None) and len(m) == 0
    m.put(1, None, "a")
    m.put(1, "ns", "b")
    m.put((1, "ns"), None, "c")  # a tuple key is not the same as key 1 in namespace "ns"
    assert (m.get(1, None), m.get(1, "ns"), m.get((1, "ns"), None)) == ("a", "b", "c")
    assert len(m) == 3
    m.put(1, None, "a2")
    assert len(m) == 3
    assert m.remove(1, "ns") == "b" and m.remove(1, "ns") is None
    assert sorted(m.keys(None), key=str) == [(1, "ns"), 1]
    assert sorted(m.entries(), key=str) == [((1, "ns"), None, "c"), (1, None, "a2")]
    assert len(m) == 2


def test_rehash_is_incremental() -> None:
    m = CopyOnWriteStateMap()
    rehashes = 0
    for k in range(50_000):
        was = m.table_sizes
        rehashing_before = m.is_rehashing
        m.put(k, None, k)
        if m.is_rehashing and not rehashing_before:
            rehashes += 1
            # starting a rehash allocates the new table only; nothing moves yet
            assert m.table_sizes[0] == was[0]
    assert rehashes >= 5
    # every entry is reachable whatever the rehash progress
    assert all(m.get(k, None) == k for k in range(0, 50_000, 7))
    assert len(m) == 50_000
    primary, _ = m.table_sizes
    assert len(m) <= primary * BUCKET_LOAD


@pytest.mark.parametrize("count", [0, 1, BUCKET_LOAD, 20_000])
def test_reserve_then_put(new_map: Any, count: int) -> None:
    """Entries put after a reserve read back as without it; the copy-on-write map puts
    them without a rehash."""
    m: StateMap = new_map()
    m.reserve(count)
    cow = m if isinstance(m, CopyOnWriteStateMap) else None
    sizes = None if cow is None else cow.table_sizes
    for k in range(count):
        m.put(k if k % 3 else (k, "t"), None if k % 5 else "ns", -k)
        assert cow is None or not cow.is_rehashing
    want = sorted(((k if k % 3 else (k, "t"), None if k % 5 else "ns", -k) for k in range(count)), key=repr)
    assert sorted(m.entries(), key=repr) == want and len(m) == count
    if cow is not None and sizes is not None:
        assert cow.table_sizes == sizes
        assert count <= sizes[0] * BUCKET_LOAD <= 2 * (count + BUCKET_LOAD)  # not oversized


def test_reserve_leaves_a_map_with_entries_alone() -> None:
    m = CopyOnWriteStateMap()
    m.put(1, None, 1)
    m.reserve(100_000)
    assert m.table_sizes == (1, 0) and m.get(1, None) == 1


def test_each_access_migrates_at_most_one_bucket() -> None:
    m = CopyOnWriteStateMap()
    k = 0
    while not m.is_rehashing:
        m.put(k, None, k)
        k += 1
    progress = []
    while m.is_rehashing:
        progress.append(m._rehash_index)
        m.get(0, None)
    assert progress == list(range(len(progress)))  # one bucket per access, in order


def test_snapshot_release_stops_copying() -> None:
    m = CopyOnWriteStateMap(copy_state=list)
    for k in range(1000):
        m.put(k, None, [k])
    snap = m.snapshot()
    shared = m.get(3, None)
    assert shared is not next(v for key, _, v in snap.entries() if key == 3)
    snap.release()
    snap.release()  # releasing twice is harmless
    assert m.get(3, None) is m.get(3, None)
    assert list(snap.entries()) == []


def test_several_snapshots(new_map: Any) -> None:
    m = new_map(list)
    m.put("k", None, [1])
    s1 = m.snapshot()
    m.get("k", None).append(2)
    s2 = m.snapshot()
    m.get("k", None).append(3)
    m.remove("k", None)
    assert list(s1.entries()) == [("k", None, [1])]
    assert list(s2.entries()) == [("k", None, [1, 2])]
    s1.release()
    assert list(s2.entries()) == [("k", None, [1, 2])]
    s2.release()


def _drain_pass(cursor: Any) -> list[Any]:
    seen = []
    while batch := cursor.next_batch():
        seen.extend((*cursor.entry(handle), state) for handle, state in batch)
    return seen


def test_cursor_visits_every_entry_each_pass(new_map: Any) -> None:
    m = new_map()
    for k in range(3000):
        m.put(k, None if k % 3 else "w", k)
    cursor = m.cursor()
    first = _drain_pass(cursor)
    assert sorted(first) == sorted(m.entries())
    assert sorted(_drain_pass(cursor)) == sorted(first)  # the next call restarts


def test_cursor_survives_rehash_and_writes(new_map: Any) -> None:
    m = new_map()
    for k in range(500):
        m.put(k, None, k)
    cursor = m.cursor()
    seen: set[int] = set()
    extra = 500
    while batch := cursor.next_batch():
        seen.update(cursor.entry(handle)[0] for handle, _ in batch)
        for _ in range(20):  # growth (and rehashing) between steps
            m.put(extra, None, extra)
            extra += 1
        m.remove(extra - 3, None)
    assert set(range(500)) <= seen  # everything present for the whole pass was visited


@pytest.mark.parametrize("rehashing", [False, True])
def test_resolve_gives_the_snapshot_view(new_map: Any, rehashing: bool) -> None:
    """Changed ids looked up in a snapshot: present ones with their state as of the snapshot,
    absent ones apart; keys alone and (key, namespace) pairs, during a rehash or not."""
    from flinkstate.state.heap.state_map import compose

    m: StateMap = new_map(lambda s: list(s))
    model: dict[Any, Any] = {}
    n = 3 * BUCKET_LOAD
    for k in range(n):
        for ns in (None, "é", 7) if k % 3 == 0 else (None,):
            m.put(k, ns, [k, ns])
            model[compose(k, ns)] = [k, ns]
    m.put((1, "t"), None, ["tuple"])
    model[(1, "t"), None] = ["tuple"]
    if rehashing:
        while isinstance(m, CopyOnWriteStateMap) and not m.is_rehashing:
            n += 1
            m.put(n, None, [n, None])
            model[n] = [n, None]
        if isinstance(m, CopyOnWriteStateMap):
            for _ in range(m.table_sizes[0] // 2):  # each access moves one bucket: half are moved
                m.get(0, None)
            assert m.is_rehashing
    snap = m.snapshot()
    for k in range(0, n, 2):  # writes after the snapshot: not in its view
        m.remove(k, None)
        state = m.get(k + 1, None)
        if state is not None:
            state.append("later")
    only_keys = [k for k in range(-5, n + 5, 3)]
    with_pairs = [*only_keys, (0, "é"), (3, 7), (4, "é"), ((1, "t"), None), (999_999, 7)]
    for ids in (only_keys, with_pairs):
        found, states, missing = snap.resolve(set(ids))
        assert sorted(map(str, missing)) == sorted(str(ck) for ck in ids if ck not in model)
        assert {str(ck): s for ck, s in zip(found, states, strict=True)} == {
            str(ck): model[ck] for ck in ids if ck in model
        }
    snap.release()
