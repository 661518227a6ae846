"""Keyed state written from rows, by every path (the Arrow writer of Flink savepoints, a
savepoint rewritten by an append, the edits of ours and of Flink's), against one model:
float keys by their bits (``0.0`` and ``-0.0`` two keys and two map user keys, every NaN of
any sign and payload one), the last row wins, a null value clears a value state's key and
is kept as a map's value."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from edit_model import build

from flinkstate.checkpoint import CompletedCheckpoint, SavepointEdits, edit_checkpoint
from flinkstate.checkpoint.flink import (
    ArrowOperator,
    ArrowState,
    edit_savepoint,
    flink_type,
    read_savepoint,
    with_operator,
    write_operators,
    write_savepoint,
)
from flinkstate.checkpoint.reading.merge import merge_keyed

DOUBLE, LONG = flink_type("double"), flink_type("long")
_NAN_BITS = struct.pack(">d", float("nan"))
FLOATS = [
    0.0,
    -0.0,
    float("nan"),
    struct.unpack(">d", b"\xff\xf8" + bytes(6))[0],  # a negative NaN
    struct.unpack(">d", b"\x7f\xf0" + bytes(5) + b"\x01")[0],  # a NaN with a payload
    1.5,
]
Model = dict[Any, Any]
Rows = tuple[pa.Table, pa.Table]


def bits(x: float) -> bytes:
    """A float key as Flink compares keys: by its bits, every NaN the one canonical NaN."""
    return _NAN_BITS if x != x else struct.pack(">d", x)


def _rows(seed: int) -> Rows:
    rng = random.Random(seed)
    n = 80
    keys = [rng.choice(FLOATS) for _ in range(n)]
    user_keys = [rng.choice(FLOATS) for _ in range(n)]
    values = [None if rng.random() < 0.2 else k for k in range(n)]
    value_rows = pa.table({"key": pa.array(keys, pa.float64()), "value": pa.array(values, pa.int64())})
    map_rows = value_rows.append_column("user_key", pa.array(user_keys, pa.float64()))
    return value_rows, map_rows


def _model(value_rows: pa.Table, map_rows: pa.Table) -> tuple[Model, Model]:
    values: Model = {}
    for r in value_rows.to_pylist():
        values[bits(r["key"])] = r["value"]
    values = {k: v for k, v in values.items() if v is not None}  # a null value stores nothing
    maps: Model = {}
    for r in map_rows.to_pylist():
        maps[(bits(r["key"]), bits(r["user_key"]))] = r["value"]
    return values, maps


def _by_bits(pairs: list[tuple[Any, Any]]) -> Model:
    out = {k: v for k, v in pairs}
    assert len(out) == len(pairs), f"two entries of one key: {pairs}"
    return out


def _flink(sp: Any, uid: str) -> tuple[Model, Model]:
    values = [(bits(r["key"]), r["value"]) for r in sp.keyed_state(uid, "v").to_pylist()]
    maps = [((bits(r["key"]), bits(r["user_key"])), r["value"]) for r in sp.keyed_state(uid, "m").to_pylist()]
    return _by_bits(values), _by_bits(maps)


def _ours(cp: CompletedCheckpoint, uid: str) -> tuple[Model, Model]:
    op = cp.manifest.operator(uid)
    assert op is not None and op.key_type is not None
    out: list[list[tuple[Any, Any]]] = []
    for name in ("v", "m"):
        meta = next(m for m in op.keyed_states if m.name == name)
        pairs: list[tuple[Any, Any]] = []
        for _kg, tables in cp.read_keyed(uid, name):
            for e in merge_keyed(tables, meta, op.key_type, False).entries():
                if name == "m":
                    pairs += [((bits(e.key), bits(u)), v) for u, v in e.value.items()]
                else:
                    pairs.append((bits(e.key), e.value))
        out.append(pairs)
    return _by_bits(out[0]), _by_bits(out[1])


def _edits(value_rows: pa.Table, map_rows: pa.Table) -> SavepointEdits:
    return (
        SavepointEdits()
        .add_operator("floats", 2, 128)
        .set_keyed_state("floats", "v", value_rows)
        .set_keyed_state("floats", "m", map_rows, kind="map")
    )


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build(str(tmp_path_factory.mktemp("floats") / "ours"))


def _arrow(tmp: Path, rows: Rows, _ours: CompletedCheckpoint) -> tuple[Model, Model]:
    value_rows, map_rows = rows
    states = [ArrowState("v", "VALUE", value_rows, LONG), ArrowState("m", "MAP", map_rows, LONG, DOUBLE)]
    return _flink(write_operators([ArrowOperator("floats", states, DOUBLE, 2)], str(tmp / "sp"), 1), "floats")


def _kept_by_an_append(tmp: Path, rows: Rows, source: CompletedCheckpoint) -> tuple[Model, Model]:
    """Written, then written again (read and rewritten) by an append of another operator."""
    _arrow(tmp, rows, source)
    other = ArrowOperator("other", [ArrowState("v", "VALUE", rows[0], LONG)], DOUBLE)
    appended = write_operators(
        with_operator(read_savepoint(str(tmp / "sp")), other), str(tmp / "sp"), 2, replace=True
    )
    return _flink(appended, "floats")


def _edit_ours(tmp: Path, rows: Rows, source: CompletedCheckpoint) -> tuple[Model, Model]:
    return _ours(edit_checkpoint(source, str(tmp / "edited"), _edits(*rows)), "floats")


def _edit_flink(tmp: Path, rows: Rows, source: CompletedCheckpoint) -> tuple[Model, Model]:
    flink = write_savepoint(source, str(tmp / "flink"))
    return _flink(edit_savepoint(flink, str(tmp / "edited"), _edits(*rows)), "floats")


PATHS: dict[str, Callable[[Path, Rows, CompletedCheckpoint], tuple[Model, Model]]] = {
    "arrow writer": _arrow,
    "kept by an append": _kept_by_an_append,
    "edit of ours": _edit_ours,
    "edit of a Flink savepoint": _edit_flink,
}


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("path", sorted(PATHS))
def test_rows_are_taken_by_one_rule_on_every_path(
    ours: CompletedCheckpoint, tmp_path: Path, path: str, seed: int
) -> None:
    rows = _rows(seed)
    assert PATHS[path](tmp_path, rows, ours) == _model(*rows)


def test_broadcast_keys_are_compared_by_bits(tmp_path: Path) -> None:
    """A broadcast state's keys by the same rule: 0.0 and -0.0 two keys, every NaN one."""
    rows = _rows(3)[0].drop_null()
    state = ArrowState("b", "BROADCAST", rows, LONG, DOUBLE)
    sp = write_operators([ArrowOperator("ops", [state], None)], str(tmp_path / "sp"), 1)
    got = _by_bits([(bits(r["key"]), r["value"]) for r in sp.operator_state("ops", "b").to_pylist()])
    assert got == {bits(r["key"]): r["value"] for r in rows.to_pylist()}
