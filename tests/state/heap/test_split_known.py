"""Splitting a heap change record (id -> the state its last write left, or None: removed)
into the ids still present, with their states, and the ids removed: the C accelerator and
the Python fallback against a plain loop, in the record's order, with the ids users pass."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from heap_accelerator import NO_C, Point, implementations

from flinkstate.state.heap.state_map import _tables, split_known_py
from flinkstate.state.heap.state_table import recorded_py

Split = Callable[[dict[Any, Any], Any], tuple[list[Any], list[Any], list[Any]]]
IMPLS = implementations(split_known_py, "split_known")


def _model(record: dict[Any, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    found, states, others = [], [], []
    for ck, state in record.items():
        if state is None:
            others.append(ck)
        else:
            found.append(ck)
            states.append(state)
    return found, states, others


def _ids(rng: random.Random, n: int) -> list[Any]:
    kinds = [
        lambda i: i,
        lambda i: f"ключ-{i}-🔑",
        lambda i: (i, f"ns{i % 3}"),
        lambda i: Point(i, None),
        lambda i: -(2**63) + i,
    ]
    return [kinds[i % len(kinds)](i) for i in rng.sample(range(10 * n), n)]


@pytest.mark.parametrize("split", IMPLS)
@pytest.mark.parametrize("removed_share", [0.0, 0.3, 1.0])
def test_split_is_the_plain_loop(split: Split, removed_share: float) -> None:
    rng = random.Random(11)
    ids = _ids(rng, 2_000)
    states: list[Any] = [[1], {"v": 2}, "s", 0, False, b"", (None,)]
    record = {ck: None if rng.random() < removed_share else rng.choice(states) for ck in ids}
    got = split(record, None)
    assert got == _model(record)
    for a, b in zip(got[1], _model(record)[1], strict=True):
        assert a is b  # the recorded objects themselves


@pytest.mark.parametrize("split", IMPLS)
def test_empty_record(split: Split) -> None:
    assert split({}, None) == ([], [], [])


@pytest.mark.skipif(_tables is None, reason=NO_C)
def test_c_refuses_what_is_not_a_dict() -> None:
    with pytest.raises(TypeError):
        _tables.split_known([(1, 2)], None)  # type: ignore[arg-type]


RECORDED = implementations(recorded_py, "recorded_pairs")


@pytest.mark.parametrize("recorded", RECORDED)
def test_recorded_keeps_each_ids_last_state(recorded: Callable[[list[Any]], dict[Any, Any]]) -> None:
    """A change list of (id, state) pairs: repeats collapse onto the last state written,
    in the order ids were first written; the states are the recorded objects."""
    changed = [1, "a", 2, None, 1, None, 3, "c", 2, "b", "ключ", None, Point(1, 2), [1]]
    got = recorded(changed)
    assert got == {1: None, 2: "b", 3: "c", "ключ": None, Point(1, 2): [1]}
    assert list(got) == [1, 2, 3, "ключ", Point(1, 2)]
    assert got[Point(1, 2)] is changed[-1]
    rng = random.Random(5)
    ids = _ids(rng, 500)
    pairs = [x for _ in range(3000) for x in (rng.choice(ids), rng.random())]
    assert recorded(pairs) == dict(zip(pairs[::2], pairs[1::2], strict=True))
    assert recorded([]) == {}


@pytest.mark.skipif(_tables is None, reason=NO_C)
def test_c_recorded_refuses_what_is_not_pairs() -> None:
    with pytest.raises(TypeError):
        _tables.recorded_pairs([1, 2, 3])
    with pytest.raises(TypeError):
        _tables.recorded_pairs((1, 2))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _tables.recorded_pairs([[1], 2])  # an unhashable id
