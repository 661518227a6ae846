"""Key groups checked against a table produced by Flink's own KeyGroupRangeAssignment."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from flinkstate.state import FlinkStateError, KeyGroupRange, Types
from flinkstate.state.keygroups import hashing
from flinkstate.state.keygroups.assignment import (
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)

TABLE = Path(__file__).resolve().parents[2] / "data" / "keygroups" / "flink_key_groups.tsv"


def _rows(kind: str) -> list[list[str]]:
    lines = TABLE.read_text(encoding="utf-8").split("\n")
    return [ln.split("\t")[1:] for ln in lines if ln.startswith(kind + "\t")]


def _decode(type_name: str, value: str) -> Any:
    if type_name == "STRING":
        return bytes.fromhex(value).decode("utf-8")
    if type_name in ("INT", "LONG", "SHORT", "BYTE"):
        return int(value)
    if type_name == "BOOLEAN":
        return value == "true"
    if type_name == "DOUBLE":
        return struct.unpack(">d", bytes.fromhex(value))[0]
    if type_name == "FLOAT":
        return struct.unpack(">f", bytes.fromhex(value))[0]
    if type_name == "CHAR":
        return chr(int(value))
    raise AssertionError(type_name)


KEY_ROWS = _rows("K")


def test_table_is_complete() -> None:
    assert len(KEY_ROWS) > 6000
    assert {r[0] for r in KEY_ROWS} == {
        "STRING",
        "INT",
        "LONG",
        "SHORT",
        "BYTE",
        "BOOLEAN",
        "DOUBLE",
        "FLOAT",
        "CHAR",
    }


@pytest.mark.parametrize("use_c", [False, True], ids=["python", "c"])
def test_key_groups_equal_flinks(use_c: bool) -> None:
    if use_c:
        assert hashing._hashing is not None, "the C accelerator was not built"
    mismatches = []
    for type_name, raw, max_p, java_hash, key_group in KEY_ROWS:
        key = _decode(type_name, raw)
        key_type = getattr(Types, type_name)()
        assert hashing.key_hash_code(key, key_type) == int(java_hash), (type_name, raw)
        if use_c:
            got = hashing.key_group_assigner(key_type)(key, int(max_p))
        else:
            got = assign_to_key_group(key, int(max_p), key_type)
        if got != int(key_group):
            mismatches.append((type_name, raw, max_p, got, key_group))
    assert mismatches == []


def test_inferred_key_types_match_flink() -> None:
    for type_name, raw, max_p, _, key_group in KEY_ROWS:
        if type_name in ("STRING", "LONG", "BOOLEAN", "DOUBLE"):
            assert assign_to_key_group(_decode(type_name, raw), int(max_p)) == int(key_group)


def test_c_string_hash_equals_python() -> None:
    assert hashing._hashing is not None
    for type_name, raw, *_ in KEY_ROWS:
        if type_name == "STRING":
            s = _decode(type_name, raw)
            assert hashing._hashing.java_string_hash(s) == hashing.java_string_hash(s)


def test_operator_ranges_equal_flinks() -> None:
    rows = _rows("R")
    assert len(rows) > 4000
    for max_p, p, i, start, end in rows:
        got = compute_key_group_range_for_operator_index(int(max_p), int(p), int(i))
        assert got == KeyGroupRange(int(start), int(end)), (max_p, p, i)


def test_operator_index_equal_flinks() -> None:
    rows = _rows("O")
    assert len(rows) > 3000
    for max_p, p, kg, index in rows:
        assert compute_operator_index_for_key_group(int(max_p), int(p), int(kg)) == int(index)


def test_ranges_partition_all_key_groups() -> None:
    for max_p in (1, 7, 128, 129, 1000):
        for p in range(1, min(max_p, 20) + 1):
            covered: list[int] = []
            for i in range(p):
                r = compute_key_group_range_for_operator_index(max_p, p, i)
                covered.extend(r)
                for kg in r:
                    assert compute_operator_index_for_key_group(max_p, p, kg) == i
            assert covered == list(range(max_p))


@pytest.mark.parametrize(
    "call",
    [
        lambda: assign_to_key_group(42, 0),
        lambda: assign_to_key_group(42, 32769),
        lambda: assign_to_key_group(42, -1),
        lambda: assign_to_key_group(None, 128),
        lambda: compute_key_group_range_for_operator_index(128, 0, 0),
        lambda: compute_key_group_range_for_operator_index(128, 129, 0),
        lambda: compute_key_group_range_for_operator_index(128, 4, 4),
        lambda: compute_key_group_range_for_operator_index(128, 4, -1),
        lambda: compute_key_group_range_for_operator_index(32769, 1, 0),
        lambda: compute_operator_index_for_key_group(128, 4, 128),
        lambda: compute_operator_index_for_key_group(128, 4, -1),
        lambda: compute_operator_index_for_key_group(128, 0, 5),
        lambda: compute_operator_index_for_key_group(0, 1, 0),
    ],
)
def test_invalid_arguments_are_typed_errors(call: Any) -> None:
    # Flink itself accepts several of these and returns nonsense (see the E rows of the
    # table); flinkstate checks every precondition.
    with pytest.raises(FlinkStateError, match=r"^\[[A-Z_]+\] "):
        call()


def test_flink_error_rows_are_all_rejected_or_equal() -> None:
    for function, args, result in _rows("E"):
        if function != "computeKeyGroupRangeForOperatorIndex" or not result.startswith("NONE"):
            continue
        max_p, p, i = (int(a) for a in args.split(","))
        with pytest.raises(FlinkStateError):
            compute_key_group_range_for_operator_index(max_p, p, i)


def test_out_of_range_keys_are_rejected() -> None:
    with pytest.raises(FlinkStateError, match="INVALID_KEY"):
        assign_to_key_group(1 << 31, 128, Types.INT())
    with pytest.raises(FlinkStateError):
        assign_to_key_group(1 << 63, 128, Types.LONG())
    with pytest.raises(FlinkStateError):
        assign_to_key_group("x", 128, Types.LONG())
    with pytest.raises(FlinkStateError):
        assign_to_key_group(True, 128, Types.LONG())


def test_other_key_types_use_a_stable_hash() -> None:
    row = Types.ROW([Types.STRING(), Types.LONG()])
    groups = {assign_to_key_group(("a", i), 128, row) for i in range(500)}
    assert len(groups) > 100
    # canonical bytes, not Python's salted hash: fixed expected values
    assert assign_to_key_group(("a", 1), 128, row) == assign_to_key_group(("a", 1), 128)
    assert (
        assign_to_key_group(b"\x00\x01", 4096)
        == hashing.murmur_hash(hashing._signed32(__import__("zlib").crc32(b"\x00\x00\x00\x02\x00\x01")))
        % 4096
    )
