"""PyFlink Python state (tests/fixtures/flink/pyflink_job.py), decoded with declared types."""

from __future__ import annotations

import pickle

import pytest
from flink_model import PYFLINK_VERSIONS, fixture

from flinkstate.checkpoint.errors import CheckpointError
from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.state.errors import FlinkStateError
from flinkstate.state.types.mapping import Types

KEYS = range(10)


@pytest.fixture(scope="module", params=PYFLINK_VERSIONS)
def sp(request):  # type: ignore[no-untyped-def]
    """The PyFlink fixture of each version with one (1.20 and 2.3)."""
    return read_savepoint(str(fixture(request.param, "pyflink")))


def test_raw_without_types_names_the_java_serializer(sp) -> None:  # type: ignore[no-untyped-def]
    states = {s.name: s for s in sp.states()}
    assert set(states) == {
        f"python-state-py_{n}" for n in ("long", "string", "pickled", "list", "map", "row")
    }
    assert states["python-state-py_long"].value_type == "PRIMITIVE_ARRAY<BYTE>"


def test_values_lists_maps(sp) -> None:  # type: ignore[no-untyped-def]
    longs = {r["key"]: r["value"] for r in sp.python_state("py-states", "py_long", Types.LONG()).to_pylist()}
    assert longs == {k: 11 * k for k in KEYS}
    text = {
        r["key"]: r["value"] for r in sp.python_state("py-states", "py_string", Types.STRING()).to_pylist()
    }
    assert text == {k: f"py{k}" for k in KEYS}
    rows = sp.python_state("py-states", "py_list", Types.LONG(), kind="list").to_pylist()
    lists: dict[int, list[int]] = {}
    for r in sorted(rows, key=lambda r: (r["key"], r["position"])):
        lists.setdefault(r["key"], []).append(r["value"])
    assert lists == {k: [k, k + 1] for k in KEYS}
    maps = sp.python_state("py-states", "py_map", Types.LONG(), kind="map", user_key_type=Types.STRING())
    assert {(r["key"], r["user_key"], r["value"]) for r in maps.to_pylist()} == {(k, "a", k) for k in KEYS}


def test_pickles_only_when_allowed(sp) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CheckpointError, match=r"\[PICKLE_NOT_ALLOWED\]"):
        sp.python_state("py-states", "py_pickled", Types.PICKLED_BYTE_ARRAY())
    table = sp.python_state("py-states", "py_pickled", Types.PICKLED_BYTE_ARRAY(), allow_pickle=True)
    assert {r["key"]: pickle.loads(r["value"]) for r in table.to_pylist()} == {k: {"k": k} for k in KEYS}


def test_wrong_declared_type_is_a_typed_error(sp) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\].*Python state py_string"):
        sp.python_state("py-states", "py_string", Types.LONG())


def _row(k: int) -> tuple[int, str | None, float]:
    return (k * 7, None if k % 3 == 0 else f"r{k}\u00e9", k / 2)


def test_rows_declared_as_types_row_or_ddl(sp) -> None:  # type: ignore[no-untyped-def]
    row = Types.ROW_NAMED(["a", "b", "c"], [Types.LONG(), Types.STRING(), Types.DOUBLE()])
    table = sp.python_state("py-states", "py_row", row)
    assert {r["key"]: tuple(r["value"].values()) for r in table.to_pylist()} == {k: _row(k) for k in KEYS}
    by_ddl = read_savepoint(sp.directory, types={"py_row": "STRUCT<a: BIGINT, b: STRING, c: DOUBLE>"})
    got = by_ddl.keyed_state("py-states", "py_row").to_pylist()
    assert {r["key"]: (r["value"]["a"], r["value"]["b"], r["value"]["c"]) for r in got} == {
        k: _row(k) for k in KEYS
    }
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\].*py_row"):
        read_savepoint(sp.directory, types={"py_row": "STRUCT<a: BIGINT, b: BIGINT>"}).keyed_state(
            "py-states", "py_row"
        )
