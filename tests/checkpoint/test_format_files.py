"""The data files: plain Parquet (one row group per key group, as the manifest indexes
them), and the rules for a subtask holding several files of one state (as Spark writers
produce): applied in order, null values remove, ``op = 1`` deletes."""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, open_checkpoint
from flinkstate.checkpoint.format import keyed_schema
from flinkstate.checkpoint.manifest import FileRef, SubtaskEntry
from flinkstate.checkpoint.parquet_files import write_row_groups
from flinkstate.checkpoint.writing.writer import SubtaskResult
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    StateKind,
    StateMetaInfo,
    StateTtlConfig,
    Time,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)

KEY = Types.STRING()
MAX_P = 128


def test_files_are_plain_parquet_indexed_by_key_group(tmp_path: Path) -> None:
    backend = HeapKeyedStateBackend(key_type=KEY)
    value = ValueStateDescriptor("value", Types.ROW_NAMED(["n", "s"], [Types.LONG(), Types.STRING()]))
    value.enable_time_to_live(StateTtlConfig.new_builder(Time.hours(1)).build())
    for i in range(500):
        backend.set_current_key(f"user-{i}")
        backend.get_state(value).update((i, None))
        backend.get_partitioned_state(i % 3, ListStateDescriptor("list", Types.LONG())).add_all([i, -i])
        backend.get_map_state(MapStateDescriptor("map", Types.INT(), Types.DOUBLE())).put(i, i / 4)
    pending = CheckpointStorage(str(tmp_path / "root")).begin()
    pending.write_keyed("op", backend)
    raw = {kg: random.Random(kg).randbytes(4000) for kg in range(0, MAX_P, 3)}
    pending.write_subtask("op", 0, 1, MAX_P, raw_keyed=raw)
    subtask = pending.commit().manifest.operators[0].subtasks[0]

    schemas = {}
    for name, (ref,) in subtask.keyed.items():
        pf = pq.ParquetFile(tmp_path / "root" / "chk-1" / ref.path)
        schemas[name] = pf.schema_arrow
        assert pf.metadata.num_row_groups == len(ref.key_groups) and pf.metadata.num_rows == ref.rows
        for kg, (rg, rows) in ref.key_groups.items():
            assert set(pf.read_row_group(rg, columns=["key_group"]).column(0).to_pylist()) == {kg}
            assert pf.metadata.row_group(rg).num_rows == rows
            stats = pf.metadata.row_group(rg).column(0).statistics  # key_group: prunable by any reader
            assert stats is not None and stats.min == stats.max == kg
        keys = pf.read(columns=["key"]).column(0).to_pylist()
        assert all(
            assign_to_key_group(k, MAX_P) == kg
            for k, kg in zip(keys, pf.read().column("key_group").to_pylist(), strict=True)
        )
    assert schemas["value"].names == ["key_group", "key", "value", "ttl_timestamp"]
    assert schemas["value"].field("value").type == pa.struct([("n", pa.int64()), ("s", pa.string())])
    assert schemas["list"].names == ["key_group", "key", "namespace", "value"]
    assert schemas["list"].field("value").type == pa.list_(pa.int64())
    assert schemas["map"].names == ["key_group", "key", "user_key", "value"]
    assert (schemas["map"].field("user_key").type, schemas["map"].field("value").type) == (
        pa.int32(),
        pa.float64(),
    )
    assert pq.read_table(tmp_path / "root" / "chk-1" / subtask.keyed["map"][0].path).num_rows == 500

    assert subtask.raw_keyed is not None
    raw_file = pq.ParquetFile(tmp_path / "root" / "chk-1" / subtask.raw_keyed.path)
    assert raw_file.read().column("data").to_pylist() == [raw[kg] for kg in sorted(raw)]
    # the blobs are stored once: no per-row-group statistics copying them into the footer
    assert subtask.raw_keyed.size < 1.25 * sum(map(len, raw.values()))


# -- several files of one state in one subtask ------------------------------------------


def commit_files(
    meta: StateMetaInfo, files: list[list[dict[str, Any]]], op: bool = False
) -> CompletedCheckpoint:
    """One subtask whose state ``meta`` is held in ``files`` (rows as dicts), in that order."""
    schema = keyed_schema(meta, KEY)
    if op:
        schema = schema.append(pa.field("op", pa.int8()))
    pending = CheckpointStorage(f"memory://format/{uuid.uuid4().hex}").begin()
    refs = []
    for n, rows in enumerate(files):
        for row in rows:
            row["key_group"] = assign_to_key_group(row["key"], MAX_P)
        rows = sorted(rows, key=lambda r: r["key_group"])
        groups = sorted({r["key_group"] for r in rows})
        tables = [
            (kg, pa.Table.from_pylist([r for r in rows if r["key_group"] == kg], schema)) for kg in groups
        ]
        written = write_row_groups(schema, tables)
        path = f"part-{n}.parquet"
        pending.directory.write_bytes(path, written.data)
        refs.append(FileRef(path, len(written.data), written.sha256, written.rows, written.key_groups))
    entry = SubtaskEntry(0, (0, MAX_P - 1), {meta.name: tuple(refs)})
    names = tuple(r.path for r in refs)
    pending.add(SubtaskResult("op", 1, MAX_P, entry, KEY, (meta,), (), names))
    return pending.commit()


def same_group_keys(n: int) -> list[str]:
    """``n`` keys of one key group, so their rows share a row group."""
    group = assign_to_key_group("a", MAX_P)
    return ["a", *[f"k{i}" for i in range(5000) if assign_to_key_group(f"k{i}", MAX_P) == group][: n - 1]]


def test_map_entries_of_one_key_in_several_files_are_merged() -> None:
    a, b, c = same_group_keys(3)
    meta = StateMetaInfo("map", StateKind.MAP, Types.LONG(), Types.STRING())
    checkpoint = commit_files(
        meta,
        [
            [{"key": a, "user_key": "x", "value": 1}, {"key": b, "user_key": "x", "value": 2}],
            [{"key": a, "user_key": "y", "value": 3}, {"key": c, "user_key": "z", "value": None}],
            [{"key": b, "user_key": "y", "value": 4}],
        ],
    )
    backend = checkpoint.keyed_backend("op", 0, 1)
    desc = MapStateDescriptor("map", Types.STRING(), Types.LONG())
    got = {}
    for key in (a, b, c):
        backend.set_current_key(key)
        got[key] = dict(backend.get_map_state(desc).items())
    assert got == {a: {"x": 1, "y": 3}, b: {"x": 2, "y": 4}, c: {"z": None}}


def test_values_and_lists_apply_in_file_order_and_nulls_store_nothing() -> None:
    a, b, c = same_group_keys(3)
    value = StateMetaInfo("value", StateKind.VALUE, Types.LONG())
    single = commit_files(value, [[{"key": a, "value": None}, {"key": b, "value": 2}]])
    assert sorted(single.keyed_backend("op", 0, 1).get_keys("value")) == [b]
    later = commit_files(
        value, [[{"key": a, "value": 1}, {"key": b, "value": 2}], [{"key": a, "value": None}]]
    )
    backend = later.keyed_backend("op", 0, 1)
    assert sorted(backend.get_keys("value")) == [b]
    overridden = commit_files(
        value, [[{"key": a, "value": 1}], [{"key": a, "value": 5}, {"key": c, "value": 6}]]
    )
    backend = overridden.keyed_backend("op", 0, 1)
    backend.set_current_key(a)
    assert backend.get_state(ValueStateDescriptor("value", Types.LONG())).value() == 5

    lists = StateMetaInfo("list", StateKind.LIST, Types.LONG())
    desc = ListStateDescriptor("list", Types.LONG())
    single = commit_files(
        lists, [[{"key": a, "value": None}, {"key": b, "value": []}, {"key": c, "value": [1]}]]
    )
    assert sorted(single.keyed_backend("op", 0, 1).get_keys("list")) == [c]
    appended = commit_files(
        lists, [[{"key": a, "value": [1, 2]}], [{"key": b, "value": [9]}, {"key": a, "value": [3]}]]
    )
    backend = appended.keyed_backend("op", 0, 1)
    backend.set_current_key(a)
    assert list(backend.get_list_state(desc).get()) == [1, 2, 3]


@pytest.mark.parametrize("kind", ["value", "map"])
def test_delete_rows_remove_what_earlier_files_wrote(kind: str) -> None:
    a, b = same_group_keys(2)
    if kind == "value":
        meta = StateMetaInfo("s", StateKind.VALUE, Types.LONG())
        files = [[{"key": a, "value": 1}, {"key": b, "value": 2}], [{"key": a, "value": None, "op": 1}]]
        expected: dict[str, Any] = {b: 2}
    else:
        meta = StateMetaInfo("s", StateKind.MAP, Types.LONG(), Types.STRING())
        files = [
            [{"key": a, "user_key": "x", "value": 1}, {"key": a, "user_key": "y", "value": 2}],
            [{"key": b, "user_key": "x", "value": 3}, {"key": a, "user_key": "x", "value": None, "op": 1}],
            [{"key": b, "user_key": None, "value": None, "op": 1}],  # no user key: the whole map
        ]
        expected = {a: {"y": 2}}
    backend = commit_files(meta, files, op=True).keyed_backend("op", 0, 1)
    got = {}
    for key in sorted(backend.get_keys("s")):
        backend.set_current_key(key)
        if kind == "value":
            got[key] = backend.get_state(ValueStateDescriptor("s", Types.LONG())).value()
        else:
            got[key] = dict(
                backend.get_map_state(MapStateDescriptor("s", Types.STRING(), Types.LONG())).items()
            )
    assert got == expected


def test_a_restored_multi_file_state_checkpoints_as_one_file() -> None:
    a, b = same_group_keys(2)
    meta = StateMetaInfo("map", StateKind.MAP, Types.LONG(), Types.STRING())
    source = commit_files(
        meta,
        [
            [{"key": a, "user_key": "x", "value": 1}],
            [{"key": a, "user_key": "y", "value": 2}, {"key": b, "user_key": "x", "value": 3}],
        ],
    )
    backend = source.keyed_backend("op", 0, 1)
    url = f"memory://format/{uuid.uuid4().hex}"
    pending = CheckpointStorage(url).begin()
    pending.write_keyed("op", backend)
    again = pending.commit()
    assert len(again.manifest.operators[0].subtasks[0].keyed["map"]) == 1
    restored = open_checkpoint(url).keyed_backend("op", 0, 1)
    restored.set_current_key(a)
    assert dict(restored.get_map_state(MapStateDescriptor("map", Types.STRING(), Types.LONG())).items()) == {
        "x": 1,
        "y": 2,
    }
