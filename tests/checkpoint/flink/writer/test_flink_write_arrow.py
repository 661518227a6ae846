"""Flink savepoints written from Arrow columns (ArrowOperator through write_operators), read
back and compared with a plain Python model; declared types; replacing a savepoint; flatten=false."""

from __future__ import annotations

import math
import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flinkstate.checkpoint.flink import (
    ArrowOperator,
    ArrowState,
    DeclaredTypeError,
    UnsupportedFlinkWriteError,
    flink_type,
    nested_view,
    read_savepoint,
    with_operator,
    write_operators,
)
from flinkstate.state.errors import FlinkStateError
from flinkstate.state.keygroups.assignment import assign_to_key_group
from flinkstate.state.types.canonical import key_token
from flinkstate.state.types.mapping import BasicTypeInfo, ListTypeInfo, MapTypeInfo, RowTypeInfo

LONG, STRING, DOUBLE = flink_type("java.lang.Long"), flink_type("java.lang.String"), flink_type("double")
WORDS = ["a", "é", "漢字", "😀x", "", "tab\there"]


def _rows(n: int, seed: int) -> list[tuple[int, Any, Any]]:
    """(key, user key, value) rows: repeated keys, nulls, unicode, NaN and -0.0."""
    rng = random.Random(seed)
    floats = [1.5, float("nan"), -0.0, 0.0, math.inf, -2.25]
    out = []
    for _ in range(n):
        value = None if rng.random() < 0.15 else rng.choice(floats)
        out.append((rng.randrange(-30, 30), rng.choice(WORDS), value))
    return out


def _model(rows: list[tuple[int, Any, Any]], kind: str) -> dict[Any, Any]:
    """What Flink holds per key: the last value (none for null), the list of non-null
    elements in row order, the map with each user key's last value (null kept)."""
    out: dict[Any, Any] = {}
    for key, user_key, value in rows:
        if kind == "VALUE":
            out[key] = value
        elif kind == "LIST":
            out.setdefault(key, []).append(value)
        else:
            out.setdefault(key, {})[user_key] = value
    return {k: v for k, v in out.items() if v is not None}


def _tokens(value: Any) -> Any:
    if isinstance(value, list):
        return [key_token(v) for v in value]
    if isinstance(value, dict):
        return {k: key_token(v) for k, v in value.items()}
    return key_token(value)


def _read(sp: Any, op: str, state: str, kind: str) -> dict[Any, Any]:
    rows = sp.keyed_state(op, state).to_pylist()
    out: dict[Any, Any] = {}
    for r in rows:
        if kind == "VALUE":
            out[r["key"]] = r["value"]
        elif kind == "LIST":
            out.setdefault(r["key"], []).append((r["position"], r["value"]))
        else:
            out.setdefault(r["key"], {})[r["user_key"]] = r["value"]
    if kind == "LIST":
        out = {k: [v for _, v in sorted(items)] for k, items in out.items()}
    return out


def _states(rows: list[tuple[int, Any, Any]], ttl: bool = False) -> list[ArrowState]:
    keys = pa.array([r[0] for r in rows], pa.int64())
    user_keys = pa.array([r[1] for r in rows], pa.string())
    values = pa.array([r[2] for r in rows], pa.float64())
    listed = [r for r in rows if r[2] is not None]
    elements = pa.table({"key": pa.array([r[0] for r in listed], pa.int64()),
                         "value": pa.array([r[2] for r in listed], pa.float64())})  # fmt: skip
    return [
        ArrowState("v", "VALUE", pa.table({"key": keys, "value": values}), DOUBLE, ttl=ttl),
        ArrowState("l", "LIST", elements, DOUBLE, ttl=ttl),
        ArrowState(
            "m", "MAP", pa.table({"key": keys, "user_key": user_keys, "value": values}), DOUBLE, STRING
        ),
    ]


@pytest.mark.parametrize(("parallelism", "max_parallelism", "ttl"), [(1, 128, False), (3, 200, True)])
def test_written_states_read_back_as_the_model(
    tmp_path: Path, parallelism: int, max_parallelism: int, ttl: bool
) -> None:
    rows = _rows(300, parallelism)
    op = ArrowOperator("op", _states(rows, ttl), LONG, parallelism, max_parallelism)
    sp = write_operators([op], str(tmp_path / "sp"), 7)
    meta = sp.operator("op")
    assert (meta.parallelism, meta.max_parallelism, sp.meta.checkpoint_id) == (
        parallelism,
        max_parallelism,
        7,
    )
    listed = [r for r in rows if r[2] is not None]
    for state, kind, source in (("v", "VALUE", rows), ("l", "LIST", listed), ("m", "MAP", rows)):
        expected = {k: _tokens(v) for k, v in _model(source, kind).items()}
        assert {k: _tokens(v) for k, v in _read(sp, "op", state, kind).items()} == expected, state


def test_operator_states_read_back(tmp_path: Path) -> None:
    table = pa.table({"key": pa.array(["x", "ü", "x"]), "value": pa.array([1, 2, 3], pa.int64())})
    states = [
        ArrowState("split", "SPLIT_DISTRIBUTE", table.select(["value"]), LONG),
        ArrowState("union", "UNION", table.select(["value"]), LONG),
        ArrowState("rules", "BROADCAST", table, LONG, STRING),
    ]
    sp = write_operators([ArrowOperator("src", states, None, 2)], str(tmp_path / "sp"), 1)
    assert sorted(sp.operator_state("src", "split").column("value").to_pylist()) == [1, 2, 3]
    assert sorted(sp.operator_state("src", "union").column("value").to_pylist()) == [1, 2, 3]
    rules = sp.operator_state("src", "rules").to_pylist()
    assert {(r["subtask"], r["key"], r["value"]) for r in rules} == {
        (s, k, v) for s in (0, 1) for k, v in [("x", 3), ("ü", 2)]
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("java.lang.Long", BasicTypeInfo("LONG")),
        ("int", BasicTypeInfo("INT")),
        ("Character", BasicTypeInfo("CHAR")),
        ("byte[]", ListTypeInfo(BasicTypeInfo("BYTE"), "PRIMITIVE_ARRAY")),
        ("java.util.List<java.lang.String>", ListTypeInfo(BasicTypeInfo("STRING"), "LIST")),
        (
            "java.util.Map<java.lang.String, java.util.List<java.lang.Long>>",
            MapTypeInfo(BasicTypeInfo("STRING"), ListTypeInfo(BasicTypeInfo("LONG"), "LIST")),
        ),
        ("BIGINT", BasicTypeInfo("LONG")),
        (
            "STRUCT<a: INT, b: STRING>",
            RowTypeInfo((BasicTypeInfo("INT"), BasicTypeInfo("STRING")), ("a", "b")),
        ),
    ],
)
def test_declared_flink_types(text: str, expected: Any) -> None:
    assert flink_type(text) == expected


@pytest.mark.parametrize("text", ["java.lang.Object", "java.util.Set<Long>", "List<Long, Long>"])
def test_unknown_declared_types_are_refused(text: str) -> None:
    with pytest.raises(DeclaredTypeError):
        flink_type(text)


@pytest.mark.parametrize(
    ("values", "declared", "why"),
    [
        (pa.array(["1", "2"]), "java.lang.Long", "string"),
        (pa.array([1, 1 << 40]), "java.lang.Integer", "not in range"),
        (pa.array([1.5]), "java.lang.Long", "double"),
        (pa.array(["ab"]), "java.lang.Character", "one UTF-16 unit"),
        (pa.array(["😀"]), "char", "one UTF-16 unit"),
        (pa.array([[1, 2]]), "java.util.List<java.lang.String>", "element"),
        (pa.array([{"a": 1}]), "STRUCT<a: BIGINT, b: STRING>", "struct"),
    ],
)
def test_values_not_fitting_their_declared_type_write_nothing(
    tmp_path: Path, values: pa.Array, declared: str, why: str
) -> None:
    target = tmp_path / "sp"
    state = ArrowState(
        "v", "VALUE", pa.table({"key": pa.array([1] * len(values)), "value": values}), flink_type(declared)
    )
    with pytest.raises(DeclaredTypeError, match=r"\[TYPE_MISMATCH\]") as info:
        write_operators([ArrowOperator("op", [state], LONG)], str(target), 1)
    assert why in str(info.value) and "operator 'op', state 'v'" in str(info.value)
    assert not target.exists()


def test_fitting_values_are_cast_to_the_declared_type(tmp_path: Path) -> None:
    table = pa.table({"key": pa.array([1, 2], pa.int32()), "value": pa.array(["x", "é"])})
    op = ArrowOperator("op", [ArrowState("c", "VALUE", table, flink_type("char"))], LONG)
    sp = write_operators([op], str(tmp_path / "sp"), 1)
    assert {r["key"]: r["value"] for r in sp.keyed_state("op", "c").to_pylist()} == {1: "x", 2: "é"}
    assert "Char" in next(s for s in sp.states() if s.name == "c").serializer


def test_types_the_writer_lacks_are_refused_naming_the_state() -> None:
    # a Map is no key type (Flink's keyBy refuses it); Rows and Tuples are
    table = pa.table(
        {"key": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64())), "value": pa.array([1])}
    )
    key = flink_type("MAP<STRING, BIGINT>")
    with pytest.raises(UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\] operator 'op': the key"):
        ArrowOperator("op", [ArrowState("v", "VALUE", table, LONG)], key)


_ONE_NULL = pa.array([None], pa.int64())


@pytest.mark.parametrize(
    ("state", "code"),
    [
        (ArrowState("l", "LIST", pa.table({"key": [1], "value": _ONE_NULL}), LONG), "NULL_ELEMENT"),
        (
            ArrowState(
                "m", "MAP", pa.table({"key": [1], "user_key": _ONE_NULL.cast(pa.string()), "value": [1]}),
                LONG, STRING,
            ),
            "NULL_KEY",
        ),
        (ArrowState("v", "VALUE", pa.table({"key": _ONE_NULL, "value": [1]}), LONG), "INVALID_KEY"),
    ],
)  # fmt: skip
def test_nulls_flink_cannot_hold_are_refused(state: ArrowState, code: str) -> None:
    with pytest.raises(FlinkStateError, match=rf"\[{code}\]"):
        ArrowOperator("op", [state], LONG)


def test_replacing_a_savepoint_keeps_the_old_one_until_metadata_is_replaced(tmp_path: Path) -> None:
    target = str(tmp_path / "sp")
    big = pa.table(
        {"key": pa.array(range(5000), pa.int64()), "value": pa.array([f"v{i}" for i in range(5000)])}
    )
    write_operators([ArrowOperator("op", [ArrowState("v", "VALUE", big, STRING)], LONG, 2)], target, 1)
    first = sorted(os.listdir(target))
    assert len(first) == 3  # _metadata and two keyed state files (above the inline threshold)
    bad = ArrowState("v", "VALUE", pa.table({"key": [1], "value": pa.array([1.5])}), LONG)
    with pytest.raises(DeclaredTypeError):
        write_operators([ArrowOperator("op", [bad], LONG, 2)], target, 2, replace=True)
    assert sorted(os.listdir(target)) == first
    smaller = big.slice(0, 3000)
    sp = write_operators(
        [ArrowOperator("op", [ArrowState("v", "VALUE", smaller, STRING)], LONG, 2)], target, 2, replace=True
    )
    assert not (set(first) - {"_metadata"}) & set(os.listdir(target)) and len(os.listdir(target)) == 3
    assert sp.keyed_state("op", "v").num_rows == 3000 and sp.meta.checkpoint_id == 2


def test_with_operator_adds_and_replaces_states(tmp_path: Path) -> None:
    first = tmp_path / "a"
    values = pa.table({"key": pa.array([1, 2]), "value": pa.array(["x", "y"])})
    ops = [
        ArrowOperator("op", [ArrowState("v", "VALUE", values, STRING)], LONG, 2),
        ArrowOperator("other", [ArrowState("w", "VALUE", values, STRING)], LONG),
    ]
    write_operators(ops, str(first), 1)
    old = read_savepoint(str(first))
    listed = ArrowState("l", "LIST", pa.table({"key": pa.array([1, 1]), "value": pa.array([3, 4])}), LONG)
    replaced = ArrowState("v", "VALUE", values.slice(0, 1), STRING)
    ops = with_operator(old, ArrowOperator("op", [listed, replaced], LONG, 2))
    sp = write_operators(ops, str(first), 2, replace=True)
    assert {
        s.name
        for s in sp.states()
        if s.operator_uid in ("", "op") and s.operator_id == sp.operator("op").operator_id
    } == {"v", "l"}
    assert (
        sp.keyed_state("op", "v").to_pylist()[0]["value"] == "x" and sp.keyed_state("op", "v").num_rows == 1
    )
    assert [r["value"] for r in sp.keyed_state("op", "l").to_pylist()] == [3, 4]
    assert sp.keyed_state("other", "w").num_rows == 2
    with pytest.raises(FlinkStateError, match=r"\[INVALID_PARALLELISM\]"):
        with_operator(sp, ArrowOperator("op", [listed], LONG, 3))
    with pytest.raises(FlinkStateError, match=r"\[KEY_TYPE_MISMATCH\]"):
        strings = pa.table({"key": ["k"], "value": pa.array([1])})
        with_operator(sp, ArrowOperator("op", [ArrowState("s", "VALUE", strings, LONG)], STRING, 2))


def _exploded(nested: list[dict[str, Any]], kind: str) -> list[tuple[Any, ...]]:
    """Nested rows (flatten=false) as the flattened rows they hold."""
    out: list[tuple[Any, ...]] = []
    for r in nested:
        ttl = r.get("ttl_timestamp")
        if kind == "LIST":
            stamps = ttl if ttl is not None else [None] * len(r["value"])
            out += [
                (r["key_group"], r["key"], i, key_token(v), t)
                for i, (v, t) in enumerate(zip(r["value"], stamps, strict=True))
            ]
        else:
            stamps = dict(ttl) if ttl is not None else {}
            out += [(r["key_group"], r["key"], u, key_token(v), stamps.get(u)) for u, v in r["value"]]
    return sorted(out, key=repr)


@pytest.mark.parametrize("ttl", [False, True])
def test_flatten_false_holds_the_flattened_rows(tmp_path: Path, ttl: bool) -> None:
    rows = _rows(200, 11)
    states = _states(rows, ttl)
    if ttl:  # Flink's TTL map serializer holds no null value
        states[2] = ArrowState(
            "m",
            "MAP",
            states[2].table.filter(states[2].table.column("value").is_valid()),
            DOUBLE,
            STRING,
            True,
        )
    sp = write_operators([ArrowOperator("op", states, LONG, 2)], str(tmp_path / "sp"), 1)
    for state, kind, extra in (("l", "LIST", "position"), ("m", "MAP", "user_key")):
        flat = sp.keyed_state("op", state)
        nested = nested_view(flat)
        assert nested.num_rows == len(set(flat.column("key").to_pylist()))
        assert nested.schema == nested_view(flat.schema.empty_table()).schema
        stamps = flat.column("ttl_timestamp").to_pylist() if ttl else [None] * flat.num_rows
        expected = sorted(
            (
                (r["key_group"], r["key"], r[extra], key_token(r["value"]), t)
                for r, t in zip(flat.to_pylist(), stamps, strict=True)
            ),
            key=repr,
        )
        assert _exploded(nested.to_pylist(), kind) == expected


def test_flatten_false_of_flink_written_fixtures() -> None:
    from flink_model import FIXTURES, KEYS, LISTS, MAPS

    sp = read_savepoint(str(FIXTURES / "heap_canonical_files"))
    for state, model in LISTS.items():
        rows = nested_view(sp.keyed_state("keyed-states", state)).to_pylist()
        assert {r["key"]: r["value"] for r in rows} == {k: model(k) for k in KEYS}, state
    for state, model in MAPS.items():
        rows = nested_view(sp.keyed_state("keyed-states", state)).to_pylist()
        assert {r["key"]: dict(r["value"]) for r in rows} == {k: model(k) for k in KEYS}, state
    assert nested_view(sp.keyed_state("keyed-states", "v_long")) == sp.keyed_state("keyed-states", "v_long")


@pytest.mark.parametrize("ttl", [False, True])
def test_distinct_keys_read_back_as_the_model(tmp_path: Path, ttl: bool) -> None:
    """A value state whose keys are all distinct (written without the per-key dictionary)."""
    keys = list(range(-60, 60))
    values = [None if k % 7 == 0 else WORDS[k % len(WORDS)] + str(k) for k in keys]
    table = pa.table({"key": pa.array(keys, pa.int64()), "value": pa.array(values)})
    op = ArrowOperator("op", [ArrowState("d", "VALUE", table, STRING, ttl=ttl)], LONG, 3, 64)
    sp = write_operators([op], str(tmp_path / "sp"), 1)
    rows = sp.keyed_state("op", "d").to_pylist()
    assert {r["key"]: r["value"] for r in rows} == {
        k: v for k, v in zip(keys, values, strict=True) if v is not None
    }
    assert all(r["key_group"] == assign_to_key_group(r["key"], 64, LONG) for r in rows)
    assert ("ttl_timestamp" in sp.keyed_state("op", "d").column_names) == ttl


@pytest.mark.parametrize("max_parallelism", [128, 300])
def test_row_and_tuple_keys_from_rows_land_in_flinks_key_groups(tmp_path: Path, max_parallelism: int) -> None:
    """Rows keyed by a Row (a struct column) or a Tuple are placed by Flink's hashCode() of
    the key, not by our own key-group hash, at the source's max parallelism too."""
    from flinkstate.checkpoint.flink.types.key_hash import java_hash_code
    from flinkstate.state.keygroups.hashing import murmur_hash

    for text, names in (
        ("STRUCT<id: BIGINT, name: STRING>", ("id", "name")),
        ("TUPLE<BIGINT, STRING>", ("f0", "f1")),
    ):
        keys = [{names[0]: i, names[1]: f"n\u00e9{i}"} for i in range(40)]
        table = pa.table({"key": pa.array(keys), "value": pa.array(range(40), pa.int64())})
        key_type = flink_type(text)
        op = ArrowOperator("op", [ArrowState("v", "VALUE", table, LONG)], key_type, 2, max_parallelism)
        target = tmp_path / text.split("<")[0]
        sp = write_operators([op], str(target), 1)
        got = sp.keyed_state("op", "v").to_pylist()
        assert sorted(r["value"] for r in got) == list(range(40))
        for r in got:
            key = tuple(r["key"].values()) if isinstance(r["key"], dict) else tuple(r["key"])
            assert r["key_group"] == murmur_hash(java_hash_code(key, key_type)) % max_parallelism, (text, key)
