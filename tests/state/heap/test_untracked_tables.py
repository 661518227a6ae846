"""The copy-on-write map's lists stay out of the cyclic garbage collector's reach while no
bucket holds a tracked object, and come back into it as soon as one does: a cycle through a
map's entries is still collected, whichever path wrote the entry."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
from heap_accelerator import NO_C

from flinkstate.state import HeapKeyedStateBackend, Types, ValueStateDescriptor
from flinkstate.state.heap import value_state
from flinkstate.state.heap.cow_map import CopyOnWriteStateMap
from flinkstate.state.heap.state_map import _tables

pytestmark = pytest.mark.skipif(_tables is None, reason=NO_C)

UPDATE_PY = value_state.PYTHON_METHODS[1]


def _lists(m: CopyOnWriteStateMap) -> list[list[Any]]:
    return [lst for lst in (m._tab, m._ver, m._hint, m._new, m._new_ver, m._new_hint) if lst]


class Node:
    """A state that refers back to what holds it (a reference cycle through the map)."""

    ref: Any = None


def _rehashing(m: CopyOnWriteStateMap, value: Any = 0) -> int:
    """Put entries until a rehash is under way that takes more than a few accesses."""
    k = len(m)
    while not (m.is_rehashing and m.table_sizes[0] > 8):
        m.put(k, None, value)
        k += 1
    return k


def test_a_map_of_atomic_entries_is_untracked_through_growth() -> None:
    m = CopyOnWriteStateMap()
    assert not any(gc.is_tracked(lst) for lst in _lists(m))
    k = _rehashing(m)
    assert not any(gc.is_tracked(lst) for lst in _lists(m))  # the rehash tables too
    while m.is_rehashing:
        m.put(k, None, f"s{k}")
        k += 1
    m.reserve(10)  # not empty: ignored
    assert not any(gc.is_tracked(lst) for lst in _lists(m))
    empty = CopyOnWriteStateMap()
    empty.reserve(100_000)
    assert not any(gc.is_tracked(lst) for lst in _lists(empty))


@pytest.mark.parametrize("rehashing", [False, True])
def test_a_tracked_state_tracks_the_bucket_tables(rehashing: bool) -> None:
    m = CopyOnWriteStateMap()
    k = _rehashing(m) if rehashing else 0
    m.put(k, None, [k])
    tables = [m._tab] + ([m._new] if m._new is not None else [])
    assert len(tables) == (2 if rehashing else 1) and all(gc.is_tracked(t) for t in tables)
    while m.is_rehashing:
        m.get(0, None)
    assert gc.is_tracked(m._tab)
    _rehashing(m, [0])  # a rehash table of a tracked map is tracked from the start
    assert gc.is_tracked(m._tab) and m._new is not None and gc.is_tracked(m._new)


def test_a_copy_on_write_copy_keeps_the_rule() -> None:
    m = CopyOnWriteStateMap(copy_state=lambda s: [s])  # a copy that makes a container
    m.put(1, None, 1)
    snap = m.snapshot()
    assert not gc.is_tracked(m._tab)
    assert m.get(1, None) == [1] and gc.is_tracked(m._tab)
    snap.release()


def test_a_tracked_hint_tracks_its_list() -> None:
    m = CopyOnWriteStateMap()
    m.put(1, None, 1)
    cursor = m.cursor()
    assert cursor.next_batch()
    cursor.set_hint(7)
    assert not gc.is_tracked(m._hint)
    cursor.set_hint([7])
    assert gc.is_tracked(m._hint)


def _collected(make: Any) -> bool:
    gc.collect()
    gone = weakref.ref(make())
    gc.collect()
    return gone() is None


def test_a_cycle_through_a_put_is_collected() -> None:
    def make() -> Node:
        m = CopyOnWriteStateMap()
        _rehashing(m)
        node = Node()
        node.ref = m
        m.put(3, None, node)
        return node

    assert _collected(make)


@pytest.mark.parametrize("update", ["c", "python"])
def test_a_cycle_through_the_value_fast_path_is_collected(update: str) -> None:
    """An int replaced in place by an object that refers back to the backend."""

    def make() -> Node:
        backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=1)
        state = backend.get_state(ValueStateDescriptor("v", Types.LONG()))
        backend.set_current_key(5)
        state.update(1)
        m = backend.table("v").maps[0]
        assert m.fast_table is not None and not gc.is_tracked(m.fast_table)
        node = Node()
        node.ref = backend
        state.update(node) if update == "c" else UPDATE_PY(state, node)
        assert gc.is_tracked(m._tab)
        return node

    assert _collected(make)
