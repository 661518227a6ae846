"""Read options keys / keyGroups / subtasks: part of the relation, checked, reading only what they name.

Readers are built and driven directly (no SparkSession), as Spark's workers would.
"""

from __future__ import annotations

import json
from collections import namedtuple
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from checkpoint_data import write_values

from flinkstate.checkpoint import Storage
from flinkstate.connector.errors import OptionError
from flinkstate.connector.options import ReadOptions
from flinkstate.connector.read.checkpoint_reader import FlinkStateReader, KeyedPartition, view_schema_of
from flinkstate.connector.source import plan_read
from flinkstate.state import Types, assign_to_key_group
from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index

ROW_KEY = Types.ROW_NAMED(["user", "n"], [Types.STRING(), Types.INT()])
K = namedtuple("K", "user n")
STRINGS = [f"ü{i}-😀" for i in range(300)]
ROWS = [K(f"u{i % 7}", i) for i in range(300)]


def _write(root: Path, name: str, key_type: Any, keys: list[Any], parallelism: int = 3) -> str:
    values = {k: n for n, k in enumerate(keys)}
    return write_values(str(root / name), key_type, values, parallelism, "v", offsets=True)


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("selection")
    return {
        "long": _write(base, "long", Types.LONG(), list(range(5000))),
        "string": _write(base, "string", Types.STRING(), STRINGS),
        "row": _write(base, "row", ROW_KEY, ROWS),
        "bytes": _write(
            base, "bytes", Types.PRIMITIVE_ARRAY(Types.BYTE()), [bytes([i, 7]) for i in range(200)]
        ),
    }


def _reader(root: str, state: str = "v", **options: str) -> FlinkStateReader:
    parsed = ReadOptions.parse({"path": root, "operator": "op", "state": state, **options})
    checkpoint = plan_read(parsed).source
    return FlinkStateReader(parsed, checkpoint, view_schema_of(parsed, checkpoint))


def _read(reader: FlinkStateReader) -> tuple[pa.Table, Storage]:
    storage = Storage(reader.directory_url)
    batches = [b for p in reader.partitions() for b in reader.read_from(storage, p)]
    return pa.Table.from_batches(batches, schema=reader.arrow_schema), storage


@pytest.mark.parametrize(
    ("kind", "json_keys", "expected"),
    [
        ("long", [4321], {4321: 4321}),
        ("long", [1, 2, 99999], {1: 1, 2: 2}),
        ("string", [STRINGS[5], "missing"], {STRINGS[5]: 5}),
        ("row", [["u3", 10], {"user": "u1", "n": 8}], {("u3", 10): 10, ("u1", 8): 8}),
        ("bytes", [[9, 7]], {b"\x09\x07": 9}),
        ("long", [], {}),
    ],
)
def test_keys_read_exactly_those_keys(
    roots: dict[str, str], kind: str, json_keys: list[Any], expected: Any
) -> None:
    table, _ = _read(_reader(roots[kind], keys=json.dumps(json_keys)))
    got = {}
    for key, value in zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True):
        got[tuple(key.values()) if isinstance(key, dict) else key] = value
    assert got == expected


def test_one_key_reads_one_row_group_of_one_file(roots: dict[str, str]) -> None:
    reader = _reader(roots["long"], keys="[4321]")
    (partition,) = reader.partitions()
    assert isinstance(partition, KeyedPartition)
    ((_ref, groups),) = partition.files
    assert groups == ((assign_to_key_group(4321, 128), groups[0][1]),)
    table, storage = _read(reader)
    assert storage.files_opened == 1 and table.num_rows == 1


def test_key_groups_option(roots: dict[str, str]) -> None:
    reader = _reader(roots["long"], keyGroups="0-15,40")
    table, _ = _read(reader)
    wanted = set(range(16)) | {40}
    assert set(table.column("key_group").to_pylist()) == wanted
    assert sorted(table.column("key").to_pylist()) == [
        k for k in range(5000) if assign_to_key_group(k, 128) in wanted
    ]
    both, _ = _read(_reader(roots["long"], keyGroups="0-15", keys="[1, 2, 3, 4, 5, 6, 7, 8]"))
    assert sorted(both.column("key").to_pylist()) == [
        k for k in range(1, 9) if assign_to_key_group(k, 128) < 16
    ]


def test_subtasks_select_operator_and_keyed_state(roots: dict[str, str]) -> None:
    offsets, _ = _read(_reader(roots["long"], "offsets", subtasks="0,2"))
    assert sorted(offsets.column("value").to_pylist()) == [0, 2, 10, 12]
    keyed, _ = _read(_reader(roots["long"], subtasks="1"))
    rng = compute_key_group_range_for_operator_index(128, 3, 1)
    assert sorted(keyed.column("key").to_pylist()) == [
        k for k in range(5000) if assign_to_key_group(k, 128) in rng
    ]


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        ("long", {"keys": '["a"]'}, r"INVALID_OPTION.*keys.*\"a\".*LONG"),
        ("long", {"keys": "[1.5]"}, r"INVALID_OPTION.*keys.*1.5"),
        ("long", {"keys": "[true]"}, r"INVALID_OPTION.*keys.*true"),
        ("long", {"keys": "7"}, r"INVALID_OPTION.*keys.*JSON list"),
        ("long", {"keys": "[1,"}, r"INVALID_OPTION.*keys.*JSON list"),
        ("string", {"keys": "[1]"}, r"INVALID_OPTION.*keys.*1.*STRING"),
        ("row", {"keys": '[["u1"]]'}, r"INVALID_OPTION.*keys.*u1"),
        ("row", {"keys": '[["u1", "x"]]'}, r"INVALID_OPTION.*keys"),
        ("bytes", {"keys": "[[300]]"}, r"INVALID_OPTION.*keys.*300"),
        ("long", {"keyGroups": "0-x"}, r"INVALID_OPTION.*keyGroups.*0-15,40"),
        ("long", {"keyGroups": "5-2"}, r"INVALID_OPTION.*keyGroups"),
        ("long", {"keyGroups": "200"}, r"INVALID_OPTION.*keyGroups.*200.*0-127"),
        ("long", {"subtasks": "3"}, r"INVALID_OPTION.*subtasks.*3.*0-2"),
    ],
)
def test_bad_selections_name_the_option(
    kind: str, options: dict[str, str], message: str, roots: dict[str, str]
) -> None:
    with pytest.raises(OptionError, match=message):
        _reader(roots[kind], **options)


def test_selection_needs_a_state_and_fits_its_kind(roots: dict[str, str]) -> None:
    with pytest.raises(OptionError, match=r"INVALID_OPTION.*keys.*operator and state"):
        ReadOptions.parse({"path": roots["long"], "keys": "[1]"})
    with pytest.raises(OptionError, match=r"INVALID_OPTION.*keys.*operator state"):
        _reader(roots["long"], "offsets", keys="[1]")
