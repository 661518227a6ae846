"""A small job's state as a plain-Python model, a savepoint of ours built from it, and what a
reader finds in a savepoint (ours or Flink's) in the model's terms: the edit tests compare an
edited savepoint with the model edited by hand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flinkstate.checkpoint import CompletedCheckpoint, SavepointEdits, begin_savepoint
from flinkstate.checkpoint.flink import FlinkSavepoint
from flinkstate.checkpoint.reading.merge import merge_keyed
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.operator import OperatorStateBackend

MAX_P = 32
PARALLELISM = 2
Model = dict[str, dict[str, dict[Any, Any]]]
"""uid -> state -> key -> value (a list, a dict); operator states: state -> {"": elements}."""

KEYS = ["a", "b", "hot", "\u00e9t\u00e9", "user-7", "\U0001f600"] + [f"k{i}" for i in range(20)]


def model() -> Model:
    return {
        "counter": {
            "count": {k: i * 10 - 3 for i, k in enumerate(KEYS)},
            "events": {k: [f"e{i}", f"f{i}"] for i, k in enumerate(KEYS[:8])},
            "totals": {k: {"x": 1.5 * i, "y": -0.0} for i, k in enumerate(KEYS[::3])},
        },
        "other": {"seen": {k: True for k in KEYS[:5]}},
        "source": {"offsets": {"": [11, 12, 13]}},
    }


def build(url: str, options: dict[str, Any] | None = None) -> CompletedCheckpoint:
    """The model as one of our savepoints at ``url``."""
    m = model()
    pending = begin_savepoint(url, options, 7)
    descriptors = {
        "count": ValueStateDescriptor("count", Types.LONG()),
        "events": ListStateDescriptor("events", Types.STRING()),
        "totals": MapStateDescriptor("totals", Types.STRING(), Types.DOUBLE()),
        "seen": ValueStateDescriptor("seen", Types.BOOLEAN()),
    }
    for uid in ("counter", "other"):
        for index in range(PARALLELISM):
            rng = compute_key_group_range_for_operator_index(MAX_P, PARALLELISM, index)
            backend = HeapKeyedStateBackend(
                key_type=Types.STRING(), max_parallelism=MAX_P, key_group_range=rng
            )
            for name, entries in m[uid].items():
                desc = descriptors[name]
                for key, value in entries.items():
                    if backend.key_group_range.start <= _group(key) <= backend.key_group_range.end:
                        backend.set_current_key(key)
                        _put(backend, desc, value)
            pending.write_subtask(uid, index, PARALLELISM, MAX_P, keyed=backend)
    for index in range(PARALLELISM):
        op_backend = OperatorStateBackend()
        state = op_backend.get_list_state(ListStateDescriptor("offsets", Types.LONG()))
        state.update(m["source"]["offsets"][""][index::PARALLELISM])
        pending.write_subtask("source", index, PARALLELISM, MAX_P, operator=op_backend)
    return pending.commit()


def _group(key: str) -> int:
    return assign_to_key_group(key, MAX_P, Types.STRING())


def _put(backend: HeapKeyedStateBackend, desc: Any, value: Any) -> None:
    if isinstance(desc, ListStateDescriptor):
        backend.get_list_state(desc).update(value)
    elif isinstance(desc, MapStateDescriptor):
        backend.get_map_state(desc).put_all(value)
    else:
        backend.get_state(desc).update(value)


def dump(cp: CompletedCheckpoint) -> Model:
    """Every state of ``cp`` in the model's terms."""
    out: Model = {}
    for op in cp.manifest.operators:
        states = out.setdefault(op.uid, {})
        for meta in op.keyed_states:
            entries = states.setdefault(meta.name, {})
            for _kg, tables in cp.read_keyed(op.uid, meta.name):
                assert op.key_type is not None
                for e in merge_keyed(tables, meta, op.key_type, False).entries():
                    entries[e.key] = e.value
        for subtask in cp.operator_states(op.uid):
            for data in subtask:
                states.setdefault(data.name, {}).setdefault("", []).extend(data.elements)
        for name in states:
            if "" in states[name]:
                states[name][""] = sorted(states[name][""])
    return out


def dump_flink(sp: FlinkSavepoint, uids: list[str]) -> Model:
    """Every state of the operators ``uids`` of a Flink savepoint, in the model's terms."""
    out: Model = {}
    for uid in uids:
        states = out.setdefault(uid, {})
        op = sp.operator(uid)
        for s in sp.states():
            if s.operator_id != op.operator_id:
                continue
            table = sp.state(uid, s.name).to_pylist()
            entries = states.setdefault(s.name, {})
            for r in sorted(table, key=lambda r: (r.get("subtask", 0), r.get("position", 0))):
                if "subtask" in r:
                    entries.setdefault("", []).append(r["value"])
                elif "position" in r:
                    entries.setdefault(r["key"], []).append(r["value"])
                elif "user_key" in r:
                    entries.setdefault(r["key"], {})[r["user_key"]] = r["value"]
                else:
                    entries[r["key"]] = r["value"]
            if "" in entries:
                entries[""] = sorted(entries[""])
    return out


Edit = tuple[SavepointEdits, Callable[[Model], None]]
"""Edits, and the same change made to the model by hand."""


def drop(m: Model, uid: str, state: str) -> None:
    del m[uid][state]


def rename(m: Model, old: str, new: str) -> None:
    m[new] = m.pop(old)


NEW_COUNTS = pa.table({"key": ["a", "zz", "a", "\U0001f600"], "value": pa.array([1, 2, 3, -4], pa.int64())})
NEW_EVENTS = pa.table({"key": ["b", "b", "new"], "value": ["x", "y", "z"]})
NEW_MAP = pa.table({"key": ["a", "a", "c"], "user_key": [1, 2, 1], "value": ["p", "q", None]})

CASES: dict[str, Edit] = {
    "remove operator": (SavepointEdits().remove_operator("other"), lambda m: m.pop("other")),
    "rename operator": (
        SavepointEdits().rename_operator("counter", "counter-v2"),
        lambda m: rename(m, "counter", "counter-v2"),
    ),
    "swap uids": (
        SavepointEdits().rename_operator("counter", "other").rename_operator("other", "counter"),
        lambda m: m.update({"counter": m["other"], "other": m["counter"]}),
    ),
    "remove keyed state": (
        SavepointEdits().remove_state("counter", "events"),
        lambda m: drop(m, "counter", "events"),
    ),
    "remove operator state": (
        SavepointEdits().remove_state("source", "offsets"),
        lambda m: drop(m, "source", "offsets"),
    ),
    "replace value state": (
        SavepointEdits().set_keyed_state("counter", "count", NEW_COUNTS),
        lambda m: m["counter"].update(count={"a": 3, "zz": 2, "\U0001f600": -4}),
    ),
    "add list state": (
        SavepointEdits().set_keyed_state("other", "log", NEW_EVENTS, kind="list"),
        lambda m: m["other"].update(log={"b": ["x", "y"], "new": ["z"]}),
    ),
    "add map state": (
        SavepointEdits().set_keyed_state("counter", "by_id", NEW_MAP, kind="map"),
        lambda m: m["counter"].update(by_id={"a": {1: "p", 2: "q"}, "c": {1: None}}),
    ),
    "add operator": (
        SavepointEdits()
        .add_operator("new-op", PARALLELISM, MAX_P)
        .set_keyed_state("new-op", "s", NEW_EVENTS, kind="list")
        .set_keyed_state("new-op", "n", NEW_COUNTS),
        lambda m: m.update(
            {"new-op": {"s": {"b": ["x", "y"], "new": ["z"]}, "n": {"a": 3, "zz": 2, "\U0001f600": -4}}}
        ),
    ),
    "max parallelism": (SavepointEdits().with_max_parallelism(64), lambda m: None),
    "everything": (
        SavepointEdits()
        .remove_operator("other")
        .rename_operator("counter", "cnt")
        .remove_state("counter", "totals")
        .set_keyed_state("counter", "count", NEW_COUNTS)
        .with_max_parallelism(128),
        lambda m: (
            m.pop("other"),
            drop(m, "counter", "totals"),
            m["counter"].update(count={"a": 3, "zz": 2, "\U0001f600": -4}),
            rename(m, "counter", "cnt"),
        ),
    ),
    "rename and rescale": (
        SavepointEdits().rename_operator("other", "o2").with_max_parallelism(7),
        lambda m: rename(m, "other", "o2"),
    ),
}
