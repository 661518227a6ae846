"""Moving a bucket's entries into a rehash table (the copy-on-write map's rehash when no
snapshot is live): the C accelerator and the Python fallback must both leave exactly the
table, versions and hints a plain per-entry model leaves, with the same errors."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from heap_accelerator import NO_C, Collide, Point, Table, implementations

from flinkstate.state.heap import state_map
from flinkstate.state.heap.cow_map import CopyOnWriteStateMap
from flinkstate.state.heap.state_map import _tables, spread_py

Spread = Callable[[dict[Any, Any], Table, list[int], list[Any], int], None]
IMPLS = implementations(spread_py, "spread")


class Refusing:
    """Hashes to 11 until told to refuse: a key whose hash fails once it is stored."""

    refuse = False

    def __hash__(self) -> int:
        if self.refuse:
            raise RuntimeError("hash refused")
        return 11


def _model(bucket: dict[Any, Any], table: Table, versions: list[int], hints: list[Any], version: int) -> None:
    for ck, state in bucket.items():
        j = hash(ck) % len(table)
        if table[j] is None:
            table[j] = {}
            versions[j] = version
        hints[j] = None
        target = table[j]
        assert target is not None
        target[ck] = state


def _bucket(rng: random.Random, size: int) -> dict[Any, Any]:
    keys: list[Any] = [
        *(rng.randrange(-(2**70), 2**70) for _ in range(size)),
        *(rng.randrange(-50, 50) for _ in range(size)),
        -1, -2, 2**61 - 1, -(2**61), 2**63, 1.5,
        "", "ключ", "键🔑", "a\x00b",
        (1, None), (-1, "é"), ("x", 7), ((1, "t"), None), Point(1, 2), (Point(-3, 4), "ns"),
        Collide("a"), Collide("b"), Collide("a", -1), Collide("z", 2**62),
    ]  # fmt: skip
    states: list[Any] = [rng.random(), "s", ("t", 1), [1, 2], {"k": None}, 0, 10**30]
    return {ck: rng.choice(states) for ck in keys}


def _start(rng: random.Random, size: int) -> tuple[Table, list[int], list[Any]]:
    """A rehash table part filled: some buckets present (holding entries or empty)."""
    table: Table = [None] * size
    versions, hints = [0] * size, [f"hint{i}" for i in range(size)]
    for j in rng.sample(range(size), size // 3):
        table[j] = {} if rng.random() < 0.3 else {("old", j): j}
        versions[j] = 1
    return table, versions, hints


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("size", [1, 2, 7, 61, 1021])
@pytest.mark.parametrize("entries", [0, 1, 3, 40, 400])
def test_spread_leaves_what_the_model_leaves(impl: Spread, size: int, entries: int) -> None:
    rng = random.Random(size * 1000 + entries)
    bucket = _bucket(rng, entries) if entries else {}
    if entries == 1:
        bucket = {"only": 1}
    table, versions, hints = _start(rng, size)
    want = ([None if b is None else dict(b) for b in table], list(versions), list(hints))
    _model(bucket, *want, 5)
    before = dict(bucket)
    impl(bucket, table, versions, hints, 5)
    assert (table, versions, hints) == want
    for j, target in enumerate(table):  # order within a target: its old entries, then the bucket's
        assert target is None or list(target) == list(want[0][j] or {})
    assert bucket == before  # the source is read, not changed


@pytest.mark.parametrize("impl", IMPLS)
def test_spread_keeps_the_objects_it_moves(impl: Spread) -> None:
    key, state = ("ключ", 2**80), ["mutable"]
    table: Table = [None] * 3
    impl({key: state}, table, [0] * 3, [None] * 3, 1)
    [(moved_key, moved_state)] = [item for b in table if b for item in b.items()]
    assert moved_key is key and moved_state is state


@pytest.mark.parametrize("impl", IMPLS)
def test_spread_errors(impl: Spread) -> None:
    with pytest.raises(ValueError):
        impl({1: 1}, [], [], [], 0)
    with pytest.raises(ValueError):
        impl({1: 1}, [None] * 3, [0] * 2, [None] * 3, 0)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_failing_spread_moves_nothing(impl: Spread) -> None:
    """A hash that fails, or a target that is not a bucket, after other entries: nothing
    has moved (every hash is taken and every target checked first)."""
    key = Refusing()
    bucket: dict[Any, Any] = {3: 3, 4: 4, 5: 5, key: 1, 6: 6}
    key.refuse = True
    table: Table = [None, {9: 9}, None, None, None]
    versions, hints = [0, 1, 0, 0, 0], ["h"] * 5
    with pytest.raises(RuntimeError, match="hash refused"):
        impl(bucket, table, versions, hints, 7)
    assert (table, versions, hints) == ([None, {9: 9}, None, None, None], [0, 1, 0, 0, 0], ["h"] * 5)
    key.refuse = False
    odd: list[Any] = [None, None, None, None, [1]]  # 4 % 5 lands on a list
    with pytest.raises(TypeError, match="neither a dict nor None"):
        impl({3: 3, 4: 4}, odd, [0] * 5, ["h"] * 5, 7)
    assert odd == [None, None, None, None, [1]]


class Meddling:
    """Hashes to 11; once armed, its hash takes another entry out of the bucket it is in."""

    def __init__(self, bucket: dict[Any, Any]) -> None:
        self.bucket, self.armed = bucket, False

    def __hash__(self) -> int:
        if self.armed:
            self.bucket.pop(("victim", "ключ"), None)
        return 11


@pytest.mark.parametrize("impl", IMPLS)
def test_a_bucket_changed_while_it_spreads_is_refused(impl: Spread) -> None:
    bucket: dict[Any, Any] = {1: 1}
    key = Meddling(bucket)
    bucket[key] = "m"
    bucket[("victim", "ключ")] = ["state"]
    bucket.update({k: k for k in range(2, 40)})
    key.armed = True
    table: Table = [None] * 7
    with pytest.raises(RuntimeError, match="changed size"):
        impl(bucket, table, [0] * 7, [None] * 7, 1)
    assert table == [None] * 7


@pytest.mark.skipif(_tables is None, reason=NO_C)
def test_spread_argument_types() -> None:
    assert _tables is not None
    with pytest.raises(TypeError):
        _tables.spread([(1, 1)], [None], [0], [None], 0)
    with pytest.raises(TypeError):
        _tables.spread({1: 1}, (None,), [0], [None], 0)


def test_a_failed_move_loses_no_entry() -> None:
    """A key whose hash fails while its bucket moves: the rehash stops there and every
    entry stays readable (the bucket leaves the old table only once it has moved)."""
    m = CopyOnWriteStateMap()
    bad = Refusing()
    for k in range(1, 128):
        m.put(k, None, k)
    m.put(bad, None, "bad")  # after 127 entries of the one bucket, before the last
    m.put(128, None, 128)
    assert m.is_rehashing and m.table_sizes == (1, 3)  # nothing has moved yet
    bad.refuse = True
    with pytest.raises(RuntimeError, match="hash refused"):
        m.put(129, None, 129)  # its access moves the one bucket first
    bad.refuse = False
    assert len(m) == 129 and len(list(m.entries())) == 129  # none lost, none twice
    assert m.get(bad, None) == "bad"
    assert [m.get(k, None) for k in range(1, 130)] == [*range(1, 129), None]


@pytest.mark.parametrize("accelerated", [True, False])
def test_a_map_grows_alike_with_and_without_c(monkeypatch: pytest.MonkeyPatch, accelerated: bool) -> None:
    """A map growing through several rehashes, with snapshots taken and released on the
    way (the shared path), through the C move or the fallback: every entry reads back as
    in a dict model, none listed twice, and each snapshot keeps its view."""
    if not accelerated:
        monkeypatch.setattr(state_map, "_tables", None)
    elif _tables is None:
        pytest.skip(NO_C)
    rng = random.Random(11)
    m = CopyOnWriteStateMap(copy_state=list)
    model: dict[Any, Any] = {}
    held: list[tuple[Any, dict[Any, Any]]] = []
    for step in range(40_000):
        key = rng.choice(
            [rng.randrange(-(2**63), 2**63), f"k{rng.randrange(9999)}é", (rng.randrange(99), "n")]
        )
        ns = None if type(key) is tuple else rng.choice([None, None, "ns"])
        m.put(key, ns, [step])
        model[(key, ns)] = [step]
        if step % 7919 == 0:
            held.append((m.snapshot(), dict(model)))
        if held and step % 5003 == 0:
            snap, seen = held.pop(0)
            assert sorted(map(repr, snap.entries())) == sorted(repr((k, n, s)) for (k, n), s in seen.items())
            snap.release()
    assert sorted(map(repr, m.entries())) == sorted(repr((k, n, s)) for (k, n), s in model.items())
    assert len(m) == len(model) and all(m.get(k, n) == s for (k, n), s in model.items())
