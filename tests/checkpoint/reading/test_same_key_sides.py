"""The one rule for "the same key" (floats by bits, one NaN; rows as tuples) on the sides
that compare keys outside a backend: the Spark writer's last-row-wins, the reader's merge
of several files, the ``keys`` option. No Spark: the functions the tasks run, on Arrow
tables, against a plain model keyed by the bits of the canonical float."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flinkstate.checkpoint.arrow_codec import from_arrow
from flinkstate.checkpoint.reading.keys import key_mask, keys_of_type
from flinkstate.checkpoint.reading.merge import merge_keyed
from flinkstate.checkpoint.writing.state_files import keyed_state_files, last_per_key
from flinkstate.connector.options import WriteOptions
from flinkstate.connector.write.plan import make_plan, state_rows
from flinkstate.state import assign_to_key_group
from flinkstate.state.descriptors import StateKind
from flinkstate.state.keyed.snapshot import StateMetaInfo
from flinkstate.state.types.canonical import NAN, NEGATIVE_ZERO
from flinkstate.state.types.mapping import BasicTypeInfo, RowTypeInfo

NAN_A = float("nan")
NAN_B = struct.unpack(">d", b"\xff\xf8\x00\x00\x00\x00\x00\x05")[0]  # other sign and payload
DOUBLE = BasicTypeInfo("DOUBLE")
LONG = BasicTypeInfo("LONG")
ROW = RowTypeInfo((BasicTypeInfo("STRING"), DOUBLE), ("s", "d"))
KEYS = [NAN_A, 1.0, NAN_B, -0.0, 0.0, -0.0, NAN_B, 0.0, 2.5]


def bits(x: float) -> bytes:
    return b"\x7f\xf8" + bytes(6) if math.isnan(x) else struct.pack(">d", x)


def last_rows_model(keys: list[Any], token: Any) -> list[int]:
    last: dict[Any, int] = {}
    for i, k in enumerate(keys):
        last[token(k)] = i
    return sorted(last.values())


def test_last_row_wins_by_bits() -> None:
    assert last_per_key(pa.array(KEYS)).to_pylist() == last_rows_model(KEYS, bits)
    rows = [{"s": "a", "d": k} for k in KEYS]
    got = last_per_key(pa.array(rows, ROW.to_arrow())).to_pylist()
    assert got == last_rows_model(KEYS, bits)


@pytest.mark.parametrize("kind", ["value", "map"])
def test_a_spark_task_keeps_the_last_row_of_each_key(kind: str) -> None:
    n = len(KEYS)
    options = {"path": "/x", "operator": "op", "state": "s", "stateType": kind, "keyColumns": "k"}
    if kind == "map":  # the same user keys under one key
        table = pa.table({"k": pa.array([7] * n, pa.int64()), "u": KEYS, "v": list(range(n))})
        options["userKeyColumn"] = "u"
    else:
        table = pa.table({"k": KEYS, "v": list(range(n))})
    plan = make_plan(WriteOptions.parse(options), table.schema)
    assert plan.key_type is not None
    written = keyed_state_files(state_rows(plan, table), plan.meta(), plan.key_type, 128, 1, "value column v")
    stored = pa.concat_tables(pq.read_table(pa.BufferReader(f.data)) for f in written.values())
    column = "user_key" if kind == "map" else "key"
    model = {bits(KEYS[i]): i for i in last_rows_model(KEYS, bits)}
    got = dict(
        zip(map(bits, stored.column(column).to_pylist()), stored.column("value").to_pylist(), strict=True)
    )
    assert got == model
    nan_bits = {struct.pack(">d", x) for x in stored.column(column).to_pylist() if math.isnan(x)}
    assert nan_bits == {bits(NAN)}  # the one NaN, stored with the canonical bits


def test_a_merge_of_several_files_applies_rows_by_bits() -> None:
    meta = StateMetaInfo("v", StateKind.VALUE, LONG)
    files = [([NAN_A, -0.0, 0.0, 3.0], [0, 0, 0, 0]), ([NAN_B, 0.0, 3.0], [0, 1, 0])]
    tables = [
        pa.table({"key_group": pa.array([0] * len(keys), pa.int32()), "key": keys,
                  "value": pa.array([10 * f + i for i in range(len(keys))], pa.int64()),
                  "op": pa.array(ops, pa.int8())})
        for f, (keys, ops) in enumerate(files)
    ]  # fmt: skip
    model: dict[bytes, int] = {}
    for f, (keys, ops) in enumerate(files):
        for i, (k, op) in enumerate(zip(keys, ops, strict=True)):
            if op:
                model.pop(bits(k), None)
            else:
                model[bits(k)] = 10 * f + i
    cols = merge_keyed(tables, meta, DOUBLE, False)
    assert dict(zip(map(bits, cols.keys), cols.values, strict=True)) == model


def test_the_keys_option_selects_by_bits() -> None:
    keys = keys_of_type(json.loads("[NaN, -0.0, NaN, -0.0]"), DOUBLE, "keys")
    assert len(keys) == 2 and keys[0] is NAN and keys[1] is NEGATIVE_ZERO
    column = pa.array([NAN_A, NAN_B, 0.0, -0.0, 1.0, None], pa.float64())
    assert key_mask(column, keys, DOUBLE).to_pylist() == [True, True, False, True, False, False]
    assert key_mask(column, [0.0], DOUBLE).to_pylist() == [False, False, True, False, False, False]
    rows = keys_of_type([["a", -0.0], {"s": "a", "d": 0.0}], ROW, "keys")
    struct_column = pa.array(
        [{"s": "a", "d": -0.0}, {"s": "a", "d": 0.0}, {"s": "b", "d": -0.0}], ROW.to_arrow()
    )
    assert key_mask(struct_column, rows[:1], ROW).to_pylist() == [True, False, False]
    assert key_mask(struct_column, rows, ROW).to_pylist() == [True, True, False]
    # and its key groups: the NaN and -0.0 keys' own (Flink's), not 0.0's
    groups = {assign_to_key_group(k, 128, DOUBLE) for k in keys}
    assert groups == {assign_to_key_group(NAN_B, 128, DOUBLE), assign_to_key_group(-0.0, 128, DOUBLE)}
    assert from_arrow(column, DOUBLE)[3] == -0.0
