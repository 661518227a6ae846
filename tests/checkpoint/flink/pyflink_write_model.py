"""The PyFlink Python state the writer's PyFlink tests write, per execution mode: a plain model,
our checkpoint of it, the spec the PyFlink restore job (tests/fixtures/flink/pyflink_restore_job.py)
declares, and the lines that job must print.

``py-values`` (LONG keys) holds Value states of every type PyFlink's mode keeps (process: a
Row; thread: a Tuple and a Map), List, Map (with a None value), Reducing and Aggregating
states and TTL Value/List/Map states (live entries); ``py-names`` (STRING keys, the empty
string and non-BMP characters included) a Value and a List state.
"""

from __future__ import annotations

import json
import math
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from write_model import LIVE_TS, OUR_TTL

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, open_checkpoint
from flinkstate.checkpoint.flink import FlinkSavepoint
from flinkstate.checkpoint.flink.writer.pyflink import row_key_group
from flinkstate.state import (
    AggregateFunction,
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)
from flinkstate.state.ttl import ManualTimeProvider

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
sys.path.insert(0, str(FIXTURES))
from pyflink_render import render, to_type  # noqa: E402

SOURCE_PARALLELISM = 2
#: write_savepoint's arguments and the restore job's max parallelism, per mode.
LAYOUT: dict[str, dict[str, Any]] = {
    "process": {"parallelism": {"py-values": 2, "py-names": 1, "py-pickled": 2}, "max_parallelism": 128},
    "thread": {"parallelism": {"py-values": 3, "py-names": 2, "py-pickled": 2}, "max_parallelism": 256},
}
#: The pickle protocol of PyFlink's pickled keys: cloudpickle's in process mode, pickle's default
#: in thread mode.
KEY_PROTOCOL = {"process": 5, "thread": pickle.DEFAULT_PROTOCOL}


@dataclass(frozen=True)
class PyState:
    kind: str  # VALUE | LIST | MAP | REDUCING | AGGREGATING
    value_type: Any  # as pyflink_render.to_type reads it
    entries: dict[Any, Any]
    user_key_type: Any = None
    ttl: bool = False


@dataclass(frozen=True)
class PyOperator:
    key_type: str
    states: dict[str, PyState]
    pickled_key: bool = False  # key_by without key_type


_DOUBLES = {0: -0.0, 1: math.inf, 2: math.nan}


def model(mode: str) -> dict[str, PyOperator]:
    keys = [*range(9), -7]
    row = ["ROW", ["a", "b", "c"], ["LONG", "STRING", "DOUBLE"]]
    values = {
        "v_long": PyState("VALUE", "LONG", {k: -(2**63) if k == 8 else k * 11 for k in keys}),
        "v_int": PyState("VALUE", "INT", {k: 2**31 - 1 if k == 8 else -3 * k for k in keys}),
        "v_short": PyState("VALUE", "SHORT", {k: k - 5 for k in keys}),
        "v_byte": PyState("VALUE", "BYTE", {k: -128 if k == 8 else k * 5 for k in keys}),
        "v_bool": PyState("VALUE", "BOOLEAN", {k: k % 2 == 0 for k in keys}),
        "v_double": PyState("VALUE", "DOUBLE", {k: _DOUBLES.get(k, k * 1.5) for k in keys}),
        "v_float": PyState("VALUE", "FLOAT", {k: k * 0.25 for k in keys}),
        "v_str": PyState("VALUE", "STRING", {k: f"py{k}\t\u00e9\u6f22\U0001f600" for k in keys}),
        "v_pickled": PyState("VALUE", "PICKLED", {k: {"k": k, "t": (k, "x")} for k in keys}),
        "l_long": PyState("LIST", "LONG", {k: [k, k + 1, -k] for k in keys}),
        "m_str": PyState(
            "MAP", "LONG", {k: {"a": k, "b": None if k % 2 else 2 * k, "\u00e9": -k} for k in keys}, "STRING"
        ),
        "r_sum": PyState("REDUCING", "LONG", {k: 100 * k for k in keys}),
        "a_acc": PyState("AGGREGATING", "LONG", {k: k + 1 for k in keys}),
        "t_value": PyState("VALUE", "LONG", {k: k for k in keys}, ttl=True),
        "t_list": PyState("LIST", "STRING", {k: [f"x{k}", "y"] for k in keys}, ttl=True),
        "t_map": PyState("MAP", "DOUBLE", {k: {"a": k / 4} for k in keys}, "STRING", ttl=True),
    }
    if mode == "process":
        values["v_row"] = PyState(
            "VALUE", row, {k: (k * 7, None if k % 3 == 0 else f"r{k}", k / 2) for k in keys}
        )
    else:
        values["v_tuple"] = PyState("VALUE", ["TUPLE", ["LONG", "STRING"]], {k: (k, f"t{k}") for k in keys})
        values["v_map"] = PyState("VALUE", ["MAP", "STRING", "LONG"], {k: {"a": k, "b": -k} for k in keys})
        values["m_int"] = PyState("MAP", "STRING", {k: {1: f"x{k}", -2: "y"} for k in keys}, "INT")
    names = ["", "a", "\u00e9\u6f22", "k\U0001f600"]
    by_name = {
        "v_len": PyState("VALUE", "LONG", {k: len(k) for k in names}),
        "l_str": PyState("LIST", "STRING", {k: [k, f"{k}!"] for k in names}),
    }
    pickled = {
        "v_long": PyState("VALUE", "LONG", {k: k * 3 for k in range(-2, 6)}),
        "m_str": PyState("MAP", "STRING", {k: {f"u{k}": "v"} for k in range(-2, 6)}, "STRING"),
    }
    return {
        "py-values": PyOperator("LONG", values),
        "py-names": PyOperator("STRING", by_name),
        "py-pickled": PyOperator("LONG", pickled, pickled_key=True),
    }


def modes(mode: str) -> dict[str, str]:
    """write_savepoint's ``pyflink_mode`` for :func:`model`'s operators."""
    return {uid: f"{mode}+pickled-key" if op.pickled_key else mode for uid, op in model(mode).items()}


def _key_field(op: PyOperator, key: Any, mode: str) -> tuple[Any, Any]:
    """PyFlink's key Row's field and its type: the key, or its pickle."""
    if op.pickled_key:
        return pickle.dumps(key, KEY_PROTOCOL[mode]), Types.PRIMITIVE_ARRAY(Types.BYTE())
    return key, to_type(Types, op.key_type)


class _Keep(AggregateFunction):
    def create_accumulator(self) -> Any:
        return None

    def add(self, value: Any, accumulator: Any) -> Any:
        return value

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return b


def _fill(backend: HeapKeyedStateBackend, name: str, s: PyState, key: Any) -> None:
    value_type = to_type(Types, s.value_type)
    backend.set_current_key(key)
    value = s.entries[key]
    if s.kind == "VALUE":
        d: Any = ValueStateDescriptor(name, value_type)
    elif s.kind == "LIST":
        d = ListStateDescriptor(name, value_type)
    elif s.kind == "MAP":
        d = MapStateDescriptor(name, to_type(Types, s.user_key_type), value_type)
    elif s.kind == "REDUCING":
        d = ReducingStateDescriptor(name, lambda a, b: b, value_type)
    else:
        d = AggregatingStateDescriptor(name, _Keep(), value_type)
    if s.ttl:
        d.enable_time_to_live(OUR_TTL)
    if s.kind == "VALUE":
        backend.get_state(d).update(value)
    elif s.kind == "LIST":
        backend.get_list_state(d).update(value)
    elif s.kind == "MAP":
        backend.get_map_state(d).put_all(value)
    elif s.kind == "REDUCING":
        backend.get_reducing_state(d).add(value)
    else:
        backend.get_aggregating_state(d).add(value)


def build_checkpoint(path: str, mode: str) -> CompletedCheckpoint:
    """Our checkpoint of :func:`model` (parallelism 2, max parallelism 128), pickles allowed."""
    pending = CheckpointStorage(path).begin()
    for uid, op in model(mode).items():
        key_type = to_type(Types, op.key_type)
        for i in range(SOURCE_PARALLELISM):
            rng = compute_key_group_range_for_operator_index(128, SOURCE_PARALLELISM, i)
            backend = HeapKeyedStateBackend(
                key_type=key_type, key_group_range=rng, time_provider=ManualTimeProvider(LIVE_TS)
            )
            for name, s in op.states.items():
                for key in s.entries:
                    if assign_to_key_group(key, 128, key_type) in rng:
                        _fill(backend, name, s, key)
            pending.write_keyed(uid, backend, i, SOURCE_PARALLELISM)
    pending.commit()
    ckpt = open_checkpoint(path, allow_pickle=True)
    assert isinstance(ckpt, CompletedCheckpoint)
    return ckpt


def spec(mode: str) -> str:
    """The restore job's spec.json for ``mode``'s model and layout."""
    layout = LAYOUT[mode]
    ops = []
    for uid, op in model(mode).items():
        states = [
            {
                "name": n,
                "kind": s.kind,
                "value_type": s.value_type,
                "user_key_type": s.user_key_type,
                "ttl": s.ttl,
            }
            for n, s in op.states.items()
        ]
        keys = sorted(next(iter(op.states.values())).entries)
        ops.append(
            {
                "uid": uid,
                "key_type": "PICKLED" if op.pickled_key else op.key_type,
                "element_type": op.key_type,
                "parallelism": layout["parallelism"][uid],
                "keys": keys,
                "states": states,
            }
        )
    return json.dumps({"max_parallelism": layout["max_parallelism"], "operators": ops}, indent=1)


def expected_lines(mode: str) -> list[str]:
    """What the restore job prints: every state of every key, in the subtask owning its key."""
    layout, out = LAYOUT[mode], []
    max_p = layout["max_parallelism"]
    for uid, op in model(mode).items():
        for name, s in op.states.items():
            for key, value in s.entries.items():
                field, field_type = _key_field(op, key, mode)
                group = row_key_group((field,), field_type, max_p)
                subtask = compute_operator_index_for_key_group(max_p, layout["parallelism"][uid], group)
                out.append(json.dumps([uid, subtask, name, render(key), render(value)]))
    return sorted(out)


def _value(v: Any, type_spec: Any) -> Any:
    """A value our reader gives, as PyFlink holds it: pickles loaded, rows and tuples as tuples,
    maps as dicts."""
    if v is None:
        return None
    if type_spec == "PICKLED" or (
        isinstance(type_spec, list) and type_spec[0] == "TUPLE" and isinstance(v, bytes)
    ):
        return pickle.loads(v)
    if isinstance(type_spec, list) and type_spec[0] in ("ROW", "TUPLE"):
        return tuple(v.values()) if isinstance(v, dict) else tuple(v)
    if isinstance(type_spec, list) and type_spec[0] == "MAP":
        return dict(v)
    return v


def read_back(sp: FlinkSavepoint, mode: str) -> list[str]:
    """What our reader finds in a savepoint written from :func:`model`, as the restore job's lines
    (the subtask from the key group each entry was written in)."""
    layout, out = LAYOUT[mode], []
    max_p = layout["max_parallelism"]
    for uid, op in model(mode).items():
        for name, s in op.states.items():
            kind = {"LIST": "list", "MAP": "map"}.get(s.kind, "value")
            if mode == "process":
                user_key = to_type(Types, s.user_key_type) if s.user_key_type else None
                table = sp.python_state(
                    uid, name, to_type(Types, s.value_type), kind, user_key, allow_pickle=True
                )
            else:
                table = sp.keyed_state(uid, name)
            found: dict[Any, Any] = {}
            groups: dict[Any, int] = {}
            for r in sorted(table.to_pylist(), key=lambda r: r.get("position") or 0):
                key = r["key"]["f0"] if isinstance(r["key"], dict) else r["key"]
                key = pickle.loads(key) if op.pickled_key else key
                groups[key] = r["key_group"]
                value = _value(r["value"], s.value_type)
                if kind == "list":
                    found.setdefault(key, []).append(value)
                elif kind == "map":
                    found.setdefault(key, {})[r["user_key"]] = value
                else:
                    found[key] = value
            for key, value in found.items():
                subtask = compute_operator_index_for_key_group(max_p, layout["parallelism"][uid], groups[key])
                out.append(json.dumps([uid, subtask, name, render(key), render(value)]))
    return sorted(out)
