"""Key groups of whole columns equal the per-key function, with and without the C accelerator."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flinkstate.state import InvalidArgumentError, Types, assign_to_key_group
from flinkstate.state.keygroups import vectorized
from flinkstate.state.types.typeinfo import TypeInformation

COLUMNS: dict[str, tuple[TypeInformation, pa.DataType, list[Any]]] = {
    "LONG": (Types.LONG(), pa.int64(), [0, -1, 1, 2**63 - 1, -(2**63), 2**32, -(2**31), 42]),
    "INT": (Types.INT(), pa.int32(), [0, -1, 2**31 - 1, -(2**31), 7]),
    "SHORT": (Types.SHORT(), pa.int16(), [0, -1, 2**15 - 1, -(2**15)]),
    "BYTE": (Types.BYTE(), pa.int8(), [0, -1, 127, -128]),
    "BOOLEAN": (Types.BOOLEAN(), pa.bool_(), [True, False]),
    "STRING": (Types.STRING(), pa.string(), ["", "alice", "b\u00f8b", "\U0001f600x"]),
}


@pytest.fixture(params=["c", "numpy"])
def accelerated(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "numpy":
        monkeypatch.setattr(vectorized, "_hashing", None)
    else:
        assert vectorized._hashing is not None, "the C accelerator was not built"
    return str(request.param)


@pytest.mark.parametrize("name", sorted(COLUMNS))
@pytest.mark.parametrize("max_parallelism", [1, 7, 128, 32768])
def test_columns_match_the_per_key_function(accelerated: str, name: str, max_parallelism: int) -> None:
    key_type, arrow, values = COLUMNS[name]
    chunked = pa.chunked_array([pa.array(values[:2], arrow), pa.array(values[2:], arrow)])
    got = vectorized.assign_key_groups(chunked, key_type, max_parallelism)
    assert got.type == pa.int32()
    assert got.to_pylist() == [assign_to_key_group(v, max_parallelism, key_type) for v in values]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=300), st.integers(1, 32768))
def test_random_longs(values: list[int], max_parallelism: int) -> None:
    column = pa.array(values, pa.int64())
    fast = vectorized.assign_key_groups(column, Types.LONG(), max_parallelism).to_pylist()
    assert fast == [assign_to_key_group(v, max_parallelism, Types.LONG()) for v in values]


def test_sliced_column_uses_its_own_values(accelerated: str) -> None:
    column = pa.array(range(-50, 50), pa.int64()).slice(10, 20)
    got = vectorized.assign_key_groups(column, Types.LONG(), 128).to_pylist()
    assert got == [assign_to_key_group(v, 128, Types.LONG()) for v in range(-40, -20)]


def test_null_keys_and_bad_parallelism_are_typed_errors(accelerated: str) -> None:
    with pytest.raises(InvalidArgumentError, match="INVALID_KEY"):
        vectorized.assign_key_groups(pa.array([1, None], pa.int64()), Types.LONG(), 128)
    with pytest.raises(InvalidArgumentError):
        vectorized.assign_key_groups(pa.array([1], pa.int64()), Types.LONG(), 0)


def test_struct_columns_are_row_keys() -> None:
    """A struct column's keys are the engine's ROW keys (tuples in field order)."""
    inner = Types.ROW_NAMED(["x", "tags"], [Types.INT(), Types.LIST(Types.STRING())])
    attrs = Types.MAP(Types.STRING(), Types.INT())
    key_type = Types.ROW_NAMED(["name", "n", "inner", "attrs"], [Types.STRING(), Types.LONG(), inner, attrs])
    keys = [
        ("alice", 1, (7, ["a"]), {"k": 1}),
        ("b\u00f8b", -2, (None, []), {}),
        ("\U0001f600", 2**40, (1, ["é", "ü"]), {"ä": 2, "z": 3}),
    ]
    rows = [{"name": k[0], "n": k[1], "inner": {"x": k[2][0], "tags": k[2][1]}, "attrs": list(k[3].items())}
            for k in keys]  # fmt: skip
    column = pa.array(rows, key_type.to_arrow())
    got = vectorized.assign_key_groups(column, key_type, 128).to_pylist()
    assert got == [assign_to_key_group(k, 128, key_type) for k in keys]
