"""Looking changed ids up in one table of dict buckets (the copy-on-write snapshot's
``resolve`` when no rehash is under way): the C accelerator and the Python fallback must
both give what a plain per-id lookup gives, in order, with the same errors."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from heap_accelerator import NO_C, Collide, Point, Table, implementations

from flinkstate.state.heap import state_map
from flinkstate.state.heap.cow_map import CopyOnWriteStateMap
from flinkstate.state.heap.state_map import _tables, resolve_in_table_py

Resolve = Callable[[Table, list[Any]], tuple[list[Any], list[Any], list[Any]]]
IMPLS = implementations(resolve_in_table_py, "resolve_in_table")


def _model(table: Table, ids: list[Any]) -> tuple[list[Any], list[Any], list[Any]]:
    found, states, missing = [], [], []
    for ck in ids:
        bucket = table[hash(ck) % len(table)]
        state = None if bucket is None else bucket.get(ck)
        if state is None:
            missing.append(ck)
        else:
            found.append(ck)
            states.append(state)
    return found, states, missing


def _table(size: int, entries: dict[Any, Any], none_buckets: bool = True) -> Table:
    table: Table = [None if none_buckets else {} for _ in range(size)]
    for ck, state in entries.items():
        slot = hash(ck) % size
        bucket = table[slot]
        if bucket is None:
            bucket = table[slot] = {}
        bucket[ck] = state
    return table


def _ids(rng: random.Random) -> list[Any]:
    return [
        *(rng.randrange(-(2**70), 2**70) for _ in range(40)),
        *(rng.randrange(-50, 50) for _ in range(40)),
        -1, -2, 2**61 - 1, -(2**61), 2**63, 1.0, True,
        "", "ключ", "键🔑", "a\x00b",
        (1, None), (-1, "é"), ("x", 7), ((1, "t"), None), Point(1, 2), (Point(-3, 4), "ns"),
        Collide("a"), Collide("b"), Collide("c"), Collide("a", -1), Collide("z", 2**62),
    ]  # fmt: skip


@pytest.mark.parametrize("resolve", IMPLS)
@pytest.mark.parametrize("size", [1, 3, 13, 509])
@pytest.mark.parametrize("none_buckets", [True, False])
def test_resolve_is_the_model(resolve: Resolve, size: int, none_buckets: bool) -> None:
    rng = random.Random(size)
    for _ in range(20):
        ids = _ids(rng)
        stored = {ck: rng.choice([[ck], "state", 0, None, ("s", ck)]) for ck in ids if rng.random() < 0.6}
        table = _table(size, stored, none_buckets)
        query = ids + rng.sample(ids, 10)  # duplicates keep their places
        rng.shuffle(query)
        got = resolve(table, query)
        want = _model(table, query)
        assert got == want
        assert all(a is b for a, b in zip(got[1], want[1], strict=True))  # the states themselves
    assert resolve(_table(size, {}), []) == ([], [], [])


class Holder:
    """An instance whose ``__dict__`` may be a split-table dict (keys shared by the class)."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


@pytest.mark.parametrize("resolve", IMPLS)
@pytest.mark.parametrize("bucket_entries", [5, 300, 70_000])
def test_buckets_of_every_shape_are_the_model(resolve: Resolve, bucket_entries: int) -> None:
    """Buckets whose index slots are 1, 2 and 4 bytes wide, with deleted entries, string-only
    keys, a dict subclass and an instance's (split) ``__dict__``; more ids than the lookups
    the C version fetches ahead: the same as a plain lookup, state objects included."""
    rng = random.Random(bucket_entries)
    size = 7
    table = _table(size, {})
    ints = [rng.randrange(-(2**62), 2**62) for _ in range(bucket_entries * 2)]
    strings = [f"s{i}é" for i in range(bucket_entries)]
    while not any(hash(k) % size >= 3 for k in strings):  # str hashes are salted per process
        strings.append(f"s{len(strings)}é")
    for i, ck in enumerate(ints):
        slot = hash(ck) % size
        if slot in (0, 1, 2):
            bucket = table[slot] = table[slot] or {}
            bucket[ck] = [i]
    for ck in ints[::3]:  # deleted entries leave dummies behind
        bucket = table[hash(ck) % size]
        if bucket is not None:
            bucket.pop(ck, None)
    unicode_slot = next(s for s in range(3, size) if any(hash(k) % size == s for k in strings))
    table[unicode_slot] = {k: k.upper() for k in strings if hash(k) % size == unicode_slot}
    holder = Holder(1, 2)
    class_dict = type("Bucket", (dict,), {})()
    for slot in range(3, size):
        if slot != unicode_slot:
            table[slot] = holder.__dict__ if slot % 2 else class_dict
    class_dict.update({k: ("sub", k) for k in ints[:50]})
    ids = ints[: bucket_entries + 20] + strings[::2] + ["a", "b", "zz"] + list(range(-30, 30))
    rng.shuffle(ids)
    got = resolve(table, ids)
    want = _model(table, ids)
    assert got == want
    assert all(a is b for a, b in zip(got[1], want[1], strict=True))


@pytest.mark.parametrize("resolve", IMPLS)
def test_lookup_errors_propagate(resolve: Resolve) -> None:
    class BadEq(Collide):
        __hash__ = Collide.__hash__

        def __eq__(self, other: object) -> bool:
            raise ValueError("eq")

    table = _table(3, {Collide("a"): 1})
    with pytest.raises(TypeError):
        resolve(table, [1, ["unhashable"]])
    with pytest.raises(ValueError, match="eq"):
        resolve(table, [BadEq("a")])


@pytest.mark.skipif(_tables is None, reason=NO_C)
def test_c_rejects_what_is_not_a_table() -> None:
    assert _tables is not None
    with pytest.raises(TypeError):
        _tables.resolve_in_table([[1]], [0])
    with pytest.raises(TypeError):
        _tables.resolve_in_table(({},), [0])
    with pytest.raises(ValueError):
        _tables.resolve_in_table([], [0])


@pytest.mark.parametrize("accelerated", [True, False])
@pytest.mark.parametrize("rehashing", [False, True])
def test_snapshot_resolve_with_and_without_c(
    monkeypatch: pytest.MonkeyPatch, accelerated: bool, rehashing: bool
) -> None:
    """The snapshot's resolve, through the C path or the fallback, during a rehash or not,
    gives the snapshot's view of each id."""
    if not accelerated:
        monkeypatch.setattr(state_map, "_tables", None)
    elif _tables is None:
        pytest.skip(NO_C)
    rng = random.Random(7)
    m = CopyOnWriteStateMap()
    model: dict[Any, Any] = {}
    while len(model) < 1000 or m.is_rehashing != rehashing:
        key = rng.choice([rng.randrange(-(2**63), 2**63), f"k{rng.random()}é", (rng.randrange(99), "n")])
        ns = None if type(key) is tuple else rng.choice([None, None, "ns"])
        m.put(key, ns, [key])
        model[key if ns is None and type(key) is not tuple else (key, ns)] = [key]
    snap = m.snapshot()
    ids = [*list(model)[::3], -1, "absent", (5, "n"), (12345, None)]
    for ck in list(model)[::2]:
        m.remove(*(ck if type(ck) is tuple else (ck, None)))
    found, states, missing = snap.resolve(ids)
    assert found == [ck for ck in ids if ck in model]
    assert states == [model[ck] for ck in found]
    assert missing == [ck for ck in ids if ck not in model]
    snap.release()
