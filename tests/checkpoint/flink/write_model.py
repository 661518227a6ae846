"""The state the Flink savepoint writer's tests write: a plain-Python model, the checkpoint of
ours built from it, and the rows a reader (ours or Flink) must find in the written savepoint.

Two operators: ``typed-values`` (Long keys) with Value state of every atomic type, List and
Map states, and TTL Value/List/Map states whose entries are either long expired (timestamp
1 s after the epoch) or live for decades; ``by-name`` (String keys, tabs and non-BMP
characters included). Flink's restore job declares TTL states with a one-hour TTL, so it
shows the live entries only; our own reader shows every entry with its timestamp.
"""

from __future__ import annotations

import datetime
import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, open_checkpoint
from flinkstate.state import (
    AggregateFunction,
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.operator import OperatorStateBackend
from flinkstate.state.ttl import ManualTimeProvider

if TYPE_CHECKING:
    from flinkstate.checkpoint.flink import FlinkSavepoint

EXPIRED_TS = 1_000
LIVE_TS = 4_000_000_000_000  # in 2096
OUR_TTL = StateTtlConfig.new_builder(datetime.timedelta(days=365 * 200)).build()
FLINK_TTL_MS = 3_600_000  # what the restore job declares: EXPIRED_TS is past it, LIVE_TS is not
SOURCE_PARALLELISM = 2
#: The savepoints of tests/fixtures/flink/written/<name>: write_savepoint's arguments. "mixed"
#: is rescaled (typed-values gets two-byte key-group prefixes) and puts streams over 2 KiB in
#: files, smaller ones inline; "inline" keeps the source's layout with every stream inline.
#: Operators keyed by each other atomic type: (key type, keys).
KEYED_BY = {
    "INT": [0, -1, 7, 2**31 - 1, -(2**31)],
    "SHORT": [0, -3, 2**15 - 1],
    "BYTE": [0, -128, 127, 5],
    "BOOLEAN": [True, False],
    "DOUBLE": [1.5, -2.25, 1e300, 0.1, 3.0],
    "FLOAT": [0.5, -1.25, 3.0],
    "CHAR": ["a", "\u00e9", "\u6f22"],
}
UIDS = ["typed-values", "by-name", "only-operator-state", *(f"key-{t.lower()}" for t in KEYED_BY)]
WRITTEN: dict[str, dict[str, Any]] = {
    "inline": {
        "parallelism": dict.fromkeys(UIDS, 2),
        "max_parallelism": dict.fromkeys(UIDS, 128),
        "inline_threshold": 1 << 20,
    },
    "mixed": {
        "parallelism": {**dict.fromkeys(UIDS, 3), "by-name": 2},
        "max_parallelism": {**dict.fromkeys(UIDS, 128), "typed-values": 256},
        "inline_threshold": 2048,
    },
}


@dataclass(frozen=True)
class StateModel:
    """A state and its entries by key: a value, a list or a dict; with TTL each value,
    element or map value is a (value, timestamp) pair."""

    kind: str  # VALUE | LIST | MAP | REDUCING | AGGREGATING (an accumulator: the last value added)
    value_type: str
    entries: dict[Any, Any]
    user_key_type: str = "-"
    ttl: bool = False


@dataclass(frozen=True)
class OperatorStateModel:
    """An operator state: per source subtask its elements (a list) or map (BROADCAST)."""

    mode: str  # SPLIT_DISTRIBUTE | UNION | BROADCAST
    value_type: str
    parts: list[Any]
    user_key_type: str = "-"


@dataclass(frozen=True)
class OperatorModel:
    key_type: str  # also declared by Flink's restore job for an operator without keyed state
    states: dict[str, StateModel] = field(default_factory=dict)
    operator_states: dict[str, OperatorStateModel] = field(default_factory=dict)


def _text(k: int) -> str:
    return f"k{k}-\u00e9\u6f22\U0001f600" if k % 4 else ("" if k == 0 else f"tab\there\nk{k}")


_DOUBLES = {1: math.nan, 2: -0.0, 3: math.inf, 4: -math.inf, 5: 1e-310}


def model() -> dict[str, OperatorModel]:
    keys = range(12)
    long_extreme = {11: -(2**63), 10: 2**63 - 1}
    typed = OperatorModel(
        "LONG",
        {
            "v_long": StateModel("VALUE", "LONG", {k: long_extreme.get(k, k * 1000 + 7) for k in keys}),
            "v_int": StateModel("VALUE", "INT", {k: 2**31 - 1 if k == 11 else -3 * k for k in keys}),
            "v_short": StateModel("VALUE", "SHORT", {k: k - 10 for k in keys}),
            "v_byte": StateModel("VALUE", "BYTE", {k: -128 if k == 11 else k * 5 for k in keys}),
            "v_bool": StateModel("VALUE", "BOOLEAN", {k: k % 2 == 0 for k in keys}),
            "v_double": StateModel("VALUE", "DOUBLE", {k: _DOUBLES.get(k, k * 1.5) for k in keys}),
            "v_float": StateModel("VALUE", "FLOAT", {k: k * 0.25 for k in keys}),
            "v_char": StateModel(
                "VALUE", "CHAR", {k: chr(ord("a") + k) if k != 11 else "\u6f22" for k in keys}
            ),
            "v_string": StateModel("VALUE", "STRING", {k: _text(k) for k in keys if k != 7}),
            "v_bytes": StateModel("VALUE", "BYTES", {k: bytes(range(250, 250 + k % 4)) for k in keys}),
            "v_list": StateModel("VALUE", "LIST<LONG>", {k: list(range(k, k + k % 3)) for k in keys}),
            "v_map": StateModel(
                "VALUE",
                "MAP<STRING,DOUBLE>",
                {k: {"x": k / 2, "n": None if k % 2 else math.nan, _text(k): -0.0} for k in keys},
            ),
            "v_tuple": StateModel("VALUE", "TUPLE<LONG,STRING>", {k: (k, f"t{k}") for k in keys}),
            "v_row": StateModel(
                "VALUE",
                "ROW<LONG,STRING,LIST<DOUBLE>>",
                {k: (k * 2, None if k % 3 == 0 else _text(k), [k / 3, -0.0]) for k in keys},
            ),
            "l_tuples": StateModel("LIST", "TUPLE<INT,BOOLEAN>", {k: [(k, True), (-k, False)] for k in keys}),
            "l_bytes": StateModel("LIST", "BYTES", {k: [b"\x00\xff,", bytes([k])] for k in keys}),
            "m_lists": StateModel(
                "MAP", "LIST<STRING>", {k: {"a": ["x", _text(k)], "b": []} for k in keys if k % 3}, "STRING"
            ),
            "l_long": StateModel("LIST", "LONG", {k: [k * 10 + i for i in range(k % 3 + 1)] for k in keys}),
            "l_string": StateModel("LIST", "STRING", {k: [f"e{k}", _text(k + 1)] for k in keys if k % 2}),
            "m_string_long": StateModel(
                "MAP", "LONG", {k: {f"u{i}": k * 100 + i for i in range(k % 3 + 1)} for k in keys}, "STRING"
            ),
            "m_int_string": StateModel(
                "MAP",
                "STRING",
                {k: {i: None if i == 1 else _text(k + i) for i in range(3)} for k in keys},
                "INT",
            ),
            "m_bool_double": StateModel(
                "MAP", "DOUBLE", {k: {True: k / 4, False: -k / 8} for k in keys}, "BOOLEAN"
            ),
            "r_sum": StateModel("REDUCING", "LONG", {k: k * 2 for k in keys if k != 3}),
            "a_last": StateModel("AGGREGATING", "STRING", {k: _text(k + 2) for k in keys}),
            "ttl_reduce": StateModel(
                "REDUCING", "INT", {k: (k, LIVE_TS if k % 3 else EXPIRED_TS) for k in keys}, ttl=True
            ),
            "ttl_value": StateModel(
                "VALUE",
                "STRING",
                {k: (f"t{k}", LIVE_TS if k % 2 == 0 else EXPIRED_TS) for k in keys},
                ttl=True,
            ),
            "ttl_list": StateModel(
                "LIST", "LONG", {k: [(k, EXPIRED_TS), (k + 1, LIVE_TS)] for k in keys}, ttl=True
            ),
            "ttl_map": StateModel(
                "MAP",
                "INT",
                {k: {"old": (k, EXPIRED_TS), "new": (k + 1, LIVE_TS)} for k in keys},
                "STRING",
                ttl=True,
            ),
        },
    )
    rules = {"a": 1.5, "b": -0.0, "\U0001f600": math.nan}
    typed.operator_states.update({
        "offsets": OperatorStateModel("SPLIT_DISTRIBUTE", "LONG", [[0, 1, 2], [100, 101, 102, 103, 104]]),
        "sources": OperatorStateModel("UNION", "STRING", [["source-0"], ["source-1 \U0001f600", "a\tb"]]),
        "rules": OperatorStateModel("BROADCAST", "DOUBLE", [rules, dict(rules)], "STRING"),
    })  # fmt: skip
    only = OperatorModel("LONG", operator_states={
        "positions": OperatorStateModel("SPLIT_DISTRIBUTE", "INT", [[1, 2, 3], []]),
        "names": OperatorStateModel("BROADCAST", "STRING", [{1: "one", 2: "two"}] * 2, "INT"),
    })  # fmt: skip
    names = ["", "alice", "b\u00f6b", "tab\there", "\U0001f600", *(f"user-{i}" for i in range(8))]
    by_name = OperatorModel(
        "STRING",
        {
            "count": StateModel("VALUE", "INT", {n: len(n) for n in names}),
            "tags": StateModel("LIST", "STRING", {n: [n, n.upper()] for n in names if n}),
        },
    )
    keyed_by = {
        f"key-{t.lower()}": OperatorModel(
            t, {"v": StateModel("VALUE", "STRING", {k: f"{t}:{k}" for k in keys})}
        )
        for t, keys in KEYED_BY.items()
    }
    return {"typed-values": typed, "by-name": by_name, "only-operator-state": only, **keyed_by}


#: The POJO classes of RestoreJob.java by type name: Java class, fields in Flink's order (by
#: name) with their types, and the fields its hashCode() hashes with Objects.hash, in order.
POJOS: dict[str, tuple[str, list[tuple[str, str]], list[str]]] = {
    "POINT": ("RestoreJob$Point", [("id", "LONG"), ("name", "STRING"), ("score", "DOUBLE")], ["name", "id"]),
    "LINE": ("RestoreJob$Line", [("item", "STRING"), ("price", "DOUBLE"), ("qty", "INT")], ["item", "qty"]),
}
#: Type names whose values are tuples of fields: NROW is a Row with field names (n0, n1, ...).
RECORDS = ("TUPLE", "ROW", "NROW", "POJO")


def split_type(name: str) -> tuple[str, list[str]]:
    """``"MAP<STRING,LIST<LONG>>"`` -> ``("MAP", ["STRING", "LIST<LONG>"])``; atomic names have no
    arguments; a POJO's are its field types (``("POJO", [...])``)."""
    if name in POJOS:
        return "POJO", [t for _, t in POJOS[name][1]]
    if "<" not in name:
        return name, []
    outer, inner = name[: name.index("<")], name[name.index("<") + 1 : -1]
    args, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        depth += {"<": 1, ">": -1}.get(c, 0)
        if c == "," and depth == 0:
            args.append(inner[start:i])
            start = i + 1
    return outer, [*args, inner[start:]]


def _type(name: str) -> Any:
    """Our type of a type name of the model (and of RestoreJob.java): an atomic name, BYTES,
    LIST<T>, MAP<K,V>, TUPLE<T1,...>, ROW<T1,...>, NROW<T1,...> or a name of POJOS."""
    outer, args = split_type(name)
    if outer == "POJO":
        java_class, fields, hash_fields = POJOS[name]
        return Types.POJO(java_class, [n for n, _ in fields], [_type(t) for t in args], hash_fields)
    if outer == "NROW":
        return Types.ROW_NAMED([f"n{i}" for i in range(len(args))], [_type(a) for a in args])
    if outer == "BYTES":
        return Types.PRIMITIVE_ARRAY(Types.BYTE())
    if outer == "LIST":
        return Types.LIST(_type(args[0]))
    if outer == "MAP":
        return Types.MAP(_type(args[0]), _type(args[1]))
    if outer in ("TUPLE", "ROW"):
        return getattr(Types, outer)([_type(a) for a in args])
    return getattr(Types, name)()


class Last(AggregateFunction[Any, Any, Any]):
    """Keeps the last value added: its accumulator is that value."""

    def create_accumulator(self) -> Any:
        return None

    def add(self, value: Any, accumulator: Any) -> Any:
        return value

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        return acc_b


def _descriptor(name: str, s: StateModel) -> Any:
    if s.kind == "VALUE":
        d: Any = ValueStateDescriptor(name, _type(s.value_type))
    elif s.kind == "REDUCING":
        d = ReducingStateDescriptor(name, lambda a, b: a + b, _type(s.value_type))
    elif s.kind == "AGGREGATING":
        d = AggregatingStateDescriptor(name, Last(), _type(s.value_type))
    elif s.kind == "LIST":
        d = ListStateDescriptor(name, _type(s.value_type))
    else:
        d = MapStateDescriptor(name, _type(s.user_key_type), _type(s.value_type))
    if s.ttl:
        d.enable_time_to_live(OUR_TTL)
    return d


def _fill(
    backend: HeapKeyedStateBackend, clock: ManualTimeProvider, name: str, s: StateModel, key: Any
) -> None:
    value = s.entries[key]
    backend.set_current_key(key)
    if s.kind in ("VALUE", "REDUCING", "AGGREGATING"):
        if s.ttl:
            clock.now, value = value[1], value[0]
        if s.kind == "VALUE":
            backend.get_state(_descriptor(name, s)).update(value)
        elif s.kind == "REDUCING":
            backend.get_reducing_state(_descriptor(name, s)).add(value)
        else:
            backend.get_aggregating_state(_descriptor(name, s)).add(value)
    elif s.kind == "LIST":
        lst = backend.get_list_state(_descriptor(name, s))
        for element in value:
            if s.ttl:
                clock.now, element = element[1], element[0]
            lst.add(element)
    else:
        mp = backend.get_map_state(_descriptor(name, s))
        for user_key, v in value.items():
            if s.ttl:
                clock.now, v = v[1], v[0]
            mp.put(user_key, v)


def _operator_backend(op: OperatorModel, subtask: int) -> OperatorStateBackend:
    backend = OperatorStateBackend()
    for name, s in op.operator_states.items():
        part = s.parts[subtask]
        if s.mode == "BROADCAST":
            desc = MapStateDescriptor(name, _type(s.user_key_type), _type(s.value_type))
            backend.get_broadcast_state(desc).put_all(part)
        elif s.mode == "UNION":
            backend.get_union_list_state(ListStateDescriptor(name, _type(s.value_type))).add_all(part)
        else:
            backend.get_list_state(ListStateDescriptor(name, _type(s.value_type))).add_all(part)
    return backend


def build_checkpoint(path: str, models: dict[str, OperatorModel] | None = None) -> CompletedCheckpoint:
    """Our checkpoint of :func:`model` (or ``models``) at ``path`` (parallelism 2, max parallelism 128)."""
    pending = CheckpointStorage(path).begin()
    for uid, op in (models or model()).items():
        for i in range(SOURCE_PARALLELISM):
            rng = compute_key_group_range_for_operator_index(128, SOURCE_PARALLELISM, i)
            clock = ManualTimeProvider(LIVE_TS)
            backend = HeapKeyedStateBackend(
                key_type=_type(op.key_type), key_group_range=rng, time_provider=clock
            )
            for name, s in op.states.items():
                for key in s.entries:
                    if assign_to_key_group(key, 128, _type(op.key_type)) in rng:
                        _fill(backend, clock, name, s, key)
            clock.now = LIVE_TS
            if op.states:
                pending.write_keyed(uid, backend, i, SOURCE_PARALLELISM)
            if op.operator_states:
                pending.write_operator(uid, _operator_backend(op, i), i, SOURCE_PARALLELISM)
    pending.commit()
    ckpt = open_checkpoint(path)
    assert isinstance(ckpt, CompletedCheckpoint)
    return ckpt


def canonical(value: Any, type_name: str) -> Any:
    """A value as compared (hashable): floats by their bytes (NaN, -0.0), FLOAT rounded to
    32 bits, lists as tuples, maps (dicts or lists of pairs) as sorted tuples of pairs."""
    if value is None:
        return None
    outer, args = split_type(type_name)
    if outer == "DOUBLE":
        return struct.pack(">d", value)
    if outer == "FLOAT":
        return struct.pack(">f", value)
    if outer == "LIST":
        return tuple(canonical(v, args[0]) for v in value)
    if outer == "MAP":
        pairs = value.items() if isinstance(value, dict) else value
        return tuple(sorted((canonical(k, args[0]), canonical(v, args[1])) for k, v in pairs))
    if outer in RECORDS:  # a tuple, or a dict of the fields (our reader's structs)
        fields = list(value.values()) if isinstance(value, dict) else list(value)
        return tuple(canonical(f, t) for f, t in zip(fields, args, strict=True))
    return value


Row = tuple[str, str, Any, Any, Any, Any]  # uid, state, key, position/user key, value, TTL timestamp


def rows(live_only: bool = False, models: dict[str, OperatorModel] | None = None) -> Iterator[Row]:
    """Every (uid, state, key, position or user key, value, timestamp) of the model; with
    ``live_only`` what Flink shows: TTL entries not expired under FLINK_TTL_MS, lists renumbered.
    ``models``: other operators than :func:`model`'s."""
    for uid, op in (models or model()).items():
        for name, s in op.states.items():
            for key, value in s.entries.items():
                k = canonical(key, op.key_type)
                if s.kind == "LIST":
                    items: list[tuple[Any, Any]] = list(enumerate(value))
                elif s.kind == "MAP":
                    items = [(canonical(u, s.user_key_type), v) for u, v in value.items()]
                else:
                    items = [(None, value)]
                position = 0
                for extra, v in items:
                    v, ts = v if s.ttl else (v, None)
                    if live_only and ts is not None and ts != LIVE_TS:
                        continue
                    if s.kind == "LIST":
                        extra = position
                        position += 1
                    yield uid, name, k, extra, canonical(v, s.value_type) if v is not None else None, ts


def read_rows(sp: FlinkSavepoint) -> set[tuple[Any, ...]]:
    """Every row of every keyed state in ``sp``, in the model's terms (key groups checked)."""
    out = set()
    for uid, op in model().items():
        meta = sp.operator(uid)
        for name, s in op.states.items():
            table = sp.keyed_state(uid, name)
            if s.ttl:
                table = table.set_column(
                    table.num_columns - 1, "ttl_timestamp", table.column("ttl_timestamp").cast(pa.int64())
                )
            for r in table.to_pylist():
                assert r["key_group"] == assign_to_key_group(
                    r["key"], meta.max_parallelism, getattr(Types, op.key_type)()
                )
                extra = r.get("position", r.get("user_key"))
                value = None if r["value"] is None else canonical(r["value"], s.value_type)
                extra = canonical(extra, s.user_key_type) if "user_key" in r else extra
                out.add((uid, name, canonical(r["key"], op.key_type), extra, value, r.get("ttl_timestamp")))
    return out
