"""Operator state: split / union list states, broadcast state, snapshots, repartitioning."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flinkstate.state import (
    FlinkStateError,
    InvalidArgumentError,
    ListStateDescriptor,
    MapStateDescriptor,
    StateAccessError,
    StateConflictError,
    StateMigrationError,
    StateTypeError,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.operator import (
    OperatorStateBackend,
    OperatorStateData,
    OperatorStateMode,
    repartition,
)
from flinkstate.state.operator.repartition import hash_map_order

SPLIT, UNION, BROADCAST = (
    OperatorStateMode.SPLIT_DISTRIBUTE,
    OperatorStateMode.UNION,
    OperatorStateMode.BROADCAST,
)


def list_desc(name: str = "l", t: Any = None) -> ListStateDescriptor:
    return ListStateDescriptor(name, t or Types.LONG())


def map_desc(name: str = "b", k: Any = None, v: Any = None) -> MapStateDescriptor:
    return MapStateDescriptor(name, k or Types.STRING(), v or Types.LONG())


def assert_code(exc: BaseException, code: str, *fragments: str) -> None:
    assert isinstance(exc, FlinkStateError)
    assert str(exc).startswith(f"[{code}] ")
    for fragment in fragments:
        assert fragment in str(exc)


# -- list states ----------------------------------------------------------------------------

GETTERS: list[Callable[[OperatorStateBackend, ListStateDescriptor], Any]] = [
    OperatorStateBackend.get_list_state,
    OperatorStateBackend.get_union_list_state,
]


@pytest.mark.parametrize("get", GETTERS)
def test_list_state_operations(get: Callable[..., Any]) -> None:
    backend = OperatorStateBackend()
    state = get(backend, list_desc())
    assert list(state.get()) == []
    state.add(1)
    state.add_all([2, 3])
    state.add_all([])
    assert list(state.get()) == [1, 2, 3]
    assert list(get(backend, list_desc()).get()) == [1, 2, 3]  # the same state again
    got = state.get()
    got.append(99)
    assert list(state.get()) == [1, 2, 3]
    state.update([7])
    assert list(state.get()) == [7]
    state.update([])
    assert list(state.get()) == []
    state.add(5)
    state.clear()
    assert list(state.get()) == []


@pytest.mark.parametrize("get", GETTERS)
@pytest.mark.parametrize(
    ("op", "arg", "code"),
    [
        ("add", None, "NULL_ELEMENT"),
        ("add_all", [4, None], "NULL_ELEMENT"),
        ("add_all", None, "NULL_ELEMENT"),
        ("update", None, "NULL_ELEMENT"),
        ("update", [None], "NULL_ELEMENT"),
        ("add_all", "abc", "INVALID_ARGUMENT"),
    ],
)
def test_list_state_refuses_none(get: Callable[..., Any], op: str, arg: Any, code: str) -> None:
    state = get(OperatorStateBackend(), list_desc())
    state.add_all([1, 2])
    with pytest.raises(InvalidArgumentError) as info:
        getattr(state, op)(arg)
    assert_code(info.value, code)
    assert list(state.get()) == [1, 2]  # nothing changed


@pytest.mark.parametrize(("first", "second"), [(GETTERS[0], GETTERS[1]), (GETTERS[1], GETTERS[0])])
def test_split_and_union_share_a_name_space(first: Any, second: Any) -> None:
    backend = OperatorStateBackend()
    first(backend, list_desc("offsets"))
    with pytest.raises(StateConflictError) as info:
        second(backend, list_desc("offsets"))
    assert_code(info.value, "STATE_MODE_CONFLICT", "'offsets'")


def test_broadcast_states_have_their_own_name_space() -> None:
    backend = OperatorStateBackend()
    backend.get_list_state(list_desc("x")).add(1)
    rules = backend.get_broadcast_state(map_desc("x"))
    rules.put("a", 2)
    assert list(backend.get_list_state(list_desc("x")).get()) == [1]
    assert dict(rules.items()) == {"a": 2}
    assert backend.get_registered_state_names() == ["x"]
    assert backend.get_registered_broadcast_state_names() == ["x"]


@pytest.mark.parametrize(
    ("getter", "first", "second"),
    [
        ("get_list_state", list_desc(), list_desc("l", Types.STRING())),
        ("get_union_list_state", list_desc(), list_desc("l", Types.INT())),
        ("get_broadcast_state", map_desc(), map_desc("b", Types.INT())),
        ("get_broadcast_state", map_desc(), map_desc("b", v=Types.STRING())),
    ],
)
def test_another_type_on_refetch_is_a_migration_error(getter: str, first: Any, second: Any) -> None:
    backend = OperatorStateBackend()
    getattr(backend, getter)(first)
    with pytest.raises(StateMigrationError) as info:
        getattr(backend, getter)(second)
    assert_code(info.value, "STATE_MIGRATION", repr(first.name))


@pytest.mark.parametrize(
    "get",
    [
        lambda b, ttl: b.get_list_state(ttl(list_desc())),
        lambda b, ttl: b.get_union_list_state(ttl(list_desc())),
        lambda b, ttl: b.get_broadcast_state(ttl(map_desc())),
    ],
)
def test_ttl_on_operator_state_is_a_typed_error(get: Callable[..., Any]) -> None:
    def with_ttl(desc: Any) -> Any:
        desc.ttl_config = object()
        return desc

    with pytest.raises(InvalidArgumentError) as info:
        get(OperatorStateBackend(), with_ttl)
    assert_code(info.value, "TTL_NOT_SUPPORTED")


def test_wrong_descriptors_and_closed_backend() -> None:
    backend = OperatorStateBackend()
    for call in (
        lambda: backend.get_list_state(map_desc()),  # type: ignore[arg-type]
        lambda: backend.get_union_list_state(ValueStateDescriptor("v", Types.LONG())),  # type: ignore[arg-type]
        lambda: backend.get_broadcast_state(list_desc()),  # type: ignore[arg-type]
    ):
        with pytest.raises(StateTypeError) as info:
            call()
        assert_code(info.value, "WRONG_DESCRIPTOR")
    backend.close()
    with pytest.raises(StateAccessError) as closed:
        backend.get_list_state(list_desc())
    assert_code(closed.value, "BACKEND_CLOSED")


def test_broadcast_state_is_a_map() -> None:
    state = OperatorStateBackend().get_broadcast_state(map_desc())
    assert state.is_empty() and state.get("a") is None
    state.put("a", 1)
    state.put_all({"b": 2, "c": None})
    state.put_all(None)
    state["d"] = 4
    assert state.contains("b") and "c" in state and not state.contains("z")
    assert (state["a"], state.get("c")) == (1, None)
    assert sorted(state.keys()) == sorted(state) == ["a", "b", "c", "d"]
    state.remove("a")
    del state["d"]
    state.remove("missing")
    assert dict(state.items()) == {"b": 2, "c": None}
    assert sorted(state.values(), key=str) == [2, None]
    with pytest.raises(InvalidArgumentError) as info:
        state.put(None, 1)
    assert_code(info.value, "NULL_KEY")
    state.clear()
    assert state.is_empty()


# -- snapshots and restore -----------------------------------------------------------------


def filled_backend() -> OperatorStateBackend:
    backend = OperatorStateBackend()
    backend.get_list_state(list_desc("split", Types.LIST(Types.LONG()))).add_all([[1], [2]])
    backend.get_union_list_state(list_desc("union")).add(3)
    backend.get_broadcast_state(map_desc("rules", v=Types.LIST(Types.LONG()))).put("r", [4])
    return backend


def test_snapshot_is_a_deep_copy() -> None:
    backend = filled_backend()
    snapshot = {(d.name, d.mode): d for d in backend.snapshot()}
    assert set(snapshot) == {("split", SPLIT), ("union", UNION), ("rules", BROADCAST)}
    assert snapshot["rules", BROADCAST].user_key_type == Types.STRING()
    assert snapshot["split", SPLIT].value_type == Types.LIST(Types.LONG())
    split = backend.get_list_state(list_desc("split", Types.LIST(Types.LONG())))
    next(iter(split.get())).append(100)  # mutate an element in place
    split.add([5])
    backend.get_broadcast_state(map_desc("rules", v=Types.LIST(Types.LONG()))).get("r").append(6)
    assert snapshot["split", SPLIT].elements == [[1], [2]]
    assert snapshot["union", UNION].elements == [3]
    assert snapshot["rules", BROADCAST].elements == {"r": [4]}


def test_restore_from_snapshot() -> None:
    snapshot = filled_backend().snapshot()
    restored = OperatorStateBackend(snapshot)
    split = restored.get_list_state(list_desc("split", Types.LIST(Types.LONG())))
    assert list(split.get()) == [[1], [2]]
    assert list(restored.get_union_list_state(list_desc("union")).get()) == [3]
    rules = restored.get_broadcast_state(map_desc("rules", v=Types.LIST(Types.LONG())))
    assert dict(rules.items()) == {"r": [4]}
    split.add([9])
    assert [d.elements for d in snapshot if d.name == "split"] == [[[1], [2]]]
    with pytest.raises(StateConflictError):
        restored.get_list_state(list_desc("union"))
    with pytest.raises(StateMigrationError):
        OperatorStateBackend(snapshot).get_list_state(list_desc("split", Types.LONG()))
    with pytest.raises(StateConflictError) as info:
        OperatorStateBackend([*snapshot, snapshot[0]])
    assert_code(info.value, "STATE_MODE_CONFLICT", "restored twice")


def test_meta_survives_copies_snapshots_and_repartitioning() -> None:
    data = OperatorStateData("s", SPLIT, Types.LONG(), [1, 2], meta={"origin": ["x"]})
    restored = OperatorStateBackend([data]).snapshot()[0]
    assert restored.meta == {"origin": ["x"]}
    assert restored.meta is not data.meta and restored.meta["origin"] is not data.meta["origin"]
    assert all(s[0].meta == {"origin": ["x"]} for s in repartition([[data]], 2))


# -- repartitioning -------------------------------------------------------------------------


def subtask(split: list[Any], union: list[Any], rules: dict[str, Any]) -> list[OperatorStateData]:
    backend = OperatorStateBackend()
    backend.get_list_state(list_desc("split")).add_all(split)
    backend.get_union_list_state(list_desc("union")).add_all(union)
    backend.get_broadcast_state(map_desc("split")).put_all(rules)  # same name, other space
    return backend.snapshot()


def by_key(states: list[OperatorStateData]) -> dict[tuple[str, OperatorStateMode], Any]:
    out = {(d.name, d.mode): d.elements for d in states}
    assert len(out) == len(states)
    return out


def old_subtasks(sizes: list[int]) -> list[list[OperatorStateData]]:
    return [
        subtask([i * 1000 + j for j in range(n)], [-i - 1] * (n % 3), {"p": i, "n": n})
        for i, n in enumerate(sizes)
    ]


@given(st.lists(st.integers(0, 12), min_size=1, max_size=6), st.integers(1, 8))
def test_repartition_properties(sizes: list[int], new_p: int) -> None:
    old = old_subtasks(sizes)
    new = [by_key(s) for s in repartition(old, new_p)]
    assert len(new) == new_p
    before = [by_key(s) for s in old]
    split = [e for s in before for e in s["split", SPLIT]]
    union = [e for s in before for e in s["union", UNION]]
    runs = [s["split", SPLIT] for s in new]
    assert collections.Counter(e for r in runs for e in r) == collections.Counter(split)
    if new_p == len(old):
        assert runs == [s["split", SPLIT] for s in before]
    else:
        assert max(map(len, runs)) - min(map(len, runs)) <= 1
        assert [e for r in runs for e in r] == split  # first split state: runs start at 0
    for i, s in enumerate(new):
        assert s["union", UNION] == union
        assert s["split", BROADCAST] == before[i % len(old)]["split", BROADCAST]


def test_split_runs_rotate_from_state_to_state_as_in_flink() -> None:
    old = [[OperatorStateData(n, SPLIT, Types.LONG(), list(range(5))) for n in "abc"]]
    new = [by_key(s) for s in repartition(old, 3)]
    # a: 2, 2, 1 from subtask 0; its larger runs end at subtask 2, where b starts; c at 1.
    assert [s["a", SPLIT] for s in new] == [[0, 1], [2, 3], [4]]
    assert [s["b", SPLIT] for s in new] == [[2, 3], [4], [0, 1]]
    assert [s["c", SPLIT] for s in new] == [[4], [0, 1], [2, 3]]
    singles = [[OperatorStateData(n, SPLIT, Types.LONG(), [n]) for n in "xyz"]]
    assert [sorted(by_key(s)) for s in repartition(singles, 3)] == [
        [("x", SPLIT), ("y", SPLIT), ("z", SPLIT)]
    ] * 3
    assert [sum(map(len, by_key(s).values())) for s in repartition(singles, 3)] == [1, 1, 1]


@pytest.mark.parametrize("registered", [["offsets", "buffer"], ["buffer", "offsets"]])
def test_split_states_rotate_in_flinks_hash_map_order(registered: list[str]) -> None:
    """Flink walks split states in its HashMap's order ("offsets" before "buffer", whatever
    the registration order), carrying the rotating start subtask from one to the next."""
    elements = {"offsets": [1, 2, 3], "buffer": [10, 20, 30]}
    old = [
        [OperatorStateData(n, SPLIT, Types.LONG(), [elements[n][i]]) for n in registered] for i in range(3)
    ]
    got = [{n: e for (n, _), e in by_key(s).items()} for s in repartition(old, 2)]
    assert got == [{"offsets": [1, 2], "buffer": [30]}, {"offsets": [3], "buffer": [10, 20]}]


def test_hash_map_order_buckets_by_capacity_then_insertion() -> None:
    # "q" (113) and "a" (97) share bucket 1 of 16 (insertion order), not of 32 (13+ names).
    assert hash_map_order(["q", "a"]) == ["q", "a"]
    many = ["q", "a", *"bcdefghijkl"]
    assert hash_map_order(many).index("a") < hash_map_order(many).index("q")
    assert hash_map_order(["buffer", "offsets"]) == ["offsets", "buffer"]


def test_unchanged_parallelism_keeps_split_state_even_when_some_subtasks_lack_it() -> None:
    old = [
        [OperatorStateData("s", SPLIT, Types.LONG(), [1, 2, 3, 4, 5])],
        [],
        [OperatorStateData("s", SPLIT, Types.LONG(), [6])],
    ]
    assert [by_key(s).get(("s", SPLIT)) for s in repartition(old, 3)] == [[1, 2, 3, 4, 5], [], [6]]


def test_repartition_round_trip_through_other_parallelisms() -> None:
    states = old_subtasks([4, 0, 7])
    split = collections.Counter(e for s in states for e in by_key(s)["split", SPLIT])
    union = {e for s in states for e in by_key(s)["union", UNION]}
    rules = [by_key(s)["split", BROADCAST] for s in states]
    for p in (1, 2, 5, 7, 3):
        states = [OperatorStateBackend(s).snapshot() for s in repartition(states, p)]
        assert len(states) == p
        now = [by_key(s) for s in states]
        assert collections.Counter(e for s in now for e in s["split", SPLIT]) == split
        assert all(set(s["union", UNION]) == union for s in now)
        assert all(s["split", BROADCAST] in rules for s in now)
    assert [by_key(s)["split", BROADCAST] for s in states] == [rules[0]] * 3  # came from p=1


def test_repartition_output_shares_nothing_with_its_input() -> None:
    old = [[OperatorStateData("u", UNION, Types.LIST(Types.LONG()), [[1]])],
           [OperatorStateData("u", UNION, Types.LIST(Types.LONG()), [[2]])]]  # fmt: skip
    old[0].append(OperatorStateData("b", BROADCAST, Types.LONG(), {"k": [0]}, Types.STRING()))
    new = repartition(old, 3)
    new[0][0].elements[0].append(9)
    new[0][1].elements["k"].append(9)
    assert old[0][0].elements == [[1]] and old[0][1].elements == {"k": [0]}
    assert [s[0].elements for s in new[1:]] == [[[1], [2]]] * 2
    assert [s[1].elements for s in new[1:]] == [{"k": [0]}] * 2


def test_repartition_conflicts_and_bad_parallelism() -> None:
    mixed = [
        [OperatorStateData("s", SPLIT, Types.LONG(), [1])],
        [OperatorStateData("s", UNION, Types.LONG(), [2])],
    ]
    with pytest.raises(StateConflictError) as info:
        repartition(mixed, 2)
    assert_code(info.value, "STATE_MODE_CONFLICT", "'s'")
    typed = [
        [OperatorStateData("s", SPLIT, Types.LONG(), [1])],
        [OperatorStateData("s", SPLIT, Types.STRING(), ["x"])],
    ]
    with pytest.raises(StateMigrationError) as migration:
        repartition(typed, 1)
    assert_code(migration.value, "STATE_MIGRATION", "'s'")
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InvalidArgumentError) as bad_p:
            repartition([[]], bad)  # type: ignore[arg-type]
        assert_code(bad_p.value, "INVALID_PARALLELISM")
