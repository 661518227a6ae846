"""Window-namespaced states and timers the Flink savepoint writer's tests write: a plain-Python
model, our checkpoint built from it, and what a reader (ours, or Flink firing the windows and
timers) must find in the written savepoint.

Operators: ``tumbling`` (String keys; a tumbling one-hour event-time window's reducing state
``window-contents`` in TimeWindow namespaces, with each window's timer at its last
millisecond), ``global`` (Long keys; the same in the GlobalWindow, timers at
Long.MAX_VALUE), ``timers`` (Long keys; a KeyedProcessFunction's event-time and
processing-time timers, registered with our process runner's timer queues) and
``window-kinds`` (Long keys; Value, List, Map, Reducing and Aggregating states with and
without TTL in TimeWindow and GlobalWindow namespaces: read back by our reader only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flink_restore import _parse as parse_value
from flink_restore import _unescape as unescape
from write_model import EXPIRED_TS, FLINK_TTL_MS, LIVE_TS, OUR_TTL, Last, canonical

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, open_checkpoint
from flinkstate.state import (
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.keygroups.assignment import compute_operator_index_for_key_group
from flinkstate.state.process.timers import TimeDomain, TimerQueue
from flinkstate.state.ttl import ManualTimeProvider

HOUR = 3_600_000
LONG_MAX = (1 << 63) - 1
EVENT_WINDOW_TIMERS = "_timer_state/event_window-timers"
SOURCE_PARALLELISM = 2
#: The operators a real Flink restores (RestoreWindowsJob.java): the others only our reader.
FLINK_UIDS = ("tumbling", "global", "timers")
#: write_savepoint's arguments for the savepoint of FLINK_UIDS Flink restores (committed in
#: tests/fixtures/flink/written/windows): rescaled, streams over 1 KiB in files.
WINDOWS_WRITTEN: dict[str, Any] = {
    "operators": FLINK_UIDS,
    "parallelism": {"tumbling": 3, "global": 2, "timers": 2},
    "max_parallelism": {"tumbling": 256, "global": 128, "timers": 64},
    "inline_threshold": 1024,
}


@dataclass(frozen=True)
class WindowState:
    """A state's entries by (key, namespace): a value, a list or a dict; with TTL each value,
    element or map value is a (value, timestamp) pair."""

    kind: str
    value_type: str
    entries: dict[tuple[Any, Any], Any]
    user_key_type: str = "-"
    ttl: bool = False


@dataclass(frozen=True)
class WindowOperator:
    key_type: str
    states: dict[str, WindowState] = field(default_factory=dict)
    #: timer queue name -> (key, namespace, timestamp) of each timer
    timers: dict[str, set[tuple[Any, Any, int]]] = field(default_factory=dict)


def _window(start_hour: int) -> tuple[int, int]:
    return (start_hour * HOUR, (start_hour + 1) * HOUR)


def _per_window(scopes: list[tuple[Any, Any]]) -> dict[str, WindowState]:
    """States a window's ProcessWindowFunction keeps per window (Flink's ``windowState()``):
    every kind, with TTL and without, in the scopes of ``scopes``."""
    at = {s: i for i, s in enumerate(scopes)}
    return {
        "w_value": WindowState("VALUE", "STRING", {s: f"v{i}\t" for s, i in at.items()}),
        "w_list": WindowState("LIST", "LONG", {s: [i, -i, LONG_MAX] for s, i in at.items() if i % 3}),
        "w_map": WindowState("MAP", "LONG", {s: {"a": i, "n": None} for s, i in at.items()}, "STRING"),
        "w_reduce": WindowState("REDUCING", "INT", {s: -i for s, i in at.items()}),
        "w_agg": WindowState("AGGREGATING", "STRING", {s: f"acc{i}" for s, i in at.items() if i % 2}),
        "w_ttl_value": WindowState(
            "VALUE",
            "STRING",
            {s: (f"t{i}", LIVE_TS if i % 2 else EXPIRED_TS) for s, i in at.items()},
            ttl=True,
        ),
        "w_ttl_list": WindowState(
            "LIST", "LONG", {s: [(i, EXPIRED_TS), (i + 1, LIVE_TS)] for s, i in at.items()}, ttl=True
        ),
        "w_ttl_map": WindowState(
            "MAP",
            "INT",
            {s: {"old": (i, EXPIRED_TS), "new": (-i, LIVE_TS)} for s, i in at.items()},
            "STRING",
            True,
        ),
    }


def model() -> dict[str, WindowOperator]:
    names = ["a", "b\u00f6", "tab\there", "\U0001f600", *(f"user-{i}" for i in range(6))]
    tumbling = {(k, _window(h)): 100 * i + h for i, k in enumerate(names) for h in range(i % 3 + 1)}
    tumbling[("neg", _window(-2))] = -7  # a window before the epoch
    glob = {(k, "GlobalWindow"): k * 3 for k in range(-3, 9)}
    kinds = {}
    for ns_name, namespaces in (("tw", [_window(0), _window(5)]), ("gw", ["GlobalWindow"])):
        scopes = [(k, ns) for k in range(6) for ns in namespaces]
        kinds.update({
            f"{ns_name}_value": WindowState("VALUE", "STRING", {s: f"v{s[0]}{s[1]}" for s in scopes}),
            f"{ns_name}_list": WindowState("LIST", "LONG", {s: [s[0], -s[0], 7] for s in scopes}),
            f"{ns_name}_map": WindowState(
                "MAP", "DOUBLE", {s: {"x": s[0] / 2, "n": None} for s in scopes}, "STRING"
            ),
            f"{ns_name}_reduce": WindowState("REDUCING", "LONG", {s: s[0] * 11 for s in scopes}),
            f"{ns_name}_agg": WindowState("AGGREGATING", "STRING", {s: f"acc{s[0]}" for s in scopes}),
            f"{ns_name}_ttl_value": WindowState(
                "VALUE", "INT", {s: (s[0], LIVE_TS if s[0] % 2 else EXPIRED_TS) for s in scopes}, ttl=True
            ),
            f"{ns_name}_ttl_list": WindowState(
                "LIST", "STRING", {s: [("old", EXPIRED_TS), (f"n{s[0]}", LIVE_TS)] for s in scopes}, ttl=True
            ),
            f"{ns_name}_ttl_map": WindowState(
                "MAP", "LONG", {s: {1: (s[0], EXPIRED_TS), 2: (-s[0], LIVE_TS)} for s in scopes}, "INT", True
            ),
        })  # fmt: skip
    return {
        "tumbling": WindowOperator(
            "STRING",
            {"window-contents": WindowState("REDUCING", "LONG", tumbling), **_per_window(sorted(tumbling))},
            {EVENT_WINDOW_TIMERS: {(k, ns, ns[1] - 1) for k, ns in tumbling}},
        ),
        "global": WindowOperator(
            "LONG",
            {"window-contents": WindowState("REDUCING", "LONG", glob), **_per_window(sorted(glob))},
            {EVENT_WINDOW_TIMERS: {(k, ns, LONG_MAX) for k, ns in glob}},
        ),
        "timers": WindowOperator(
            "LONG",
            timers={
                "_timer_state/event_user-timers": {
                    (k, None, t) for k in range(10) for t in (-5, k * 1000, LONG_MAX)
                },
                "_timer_state/processing_user-timers": {(k, None, 1000 + k) for k in range(0, 10, 3)},
            },
        ),
        "window-kinds": WindowOperator("LONG", kinds),
    }  # fmt: skip


def _type(name: str) -> Any:
    return Types.PRIMITIVE_ARRAY(Types.BYTE()) if name == "BYTES" else getattr(Types, name)()


def _descriptor(name: str, s: WindowState) -> Any:
    value = _type(s.value_type)
    descriptors = {
        "VALUE": lambda: ValueStateDescriptor(name, value),
        "LIST": lambda: ListStateDescriptor(name, value),
        "MAP": lambda: MapStateDescriptor(name, _type(s.user_key_type), value),
        "REDUCING": lambda: ReducingStateDescriptor(name, lambda a, b: a + b, value),
        "AGGREGATING": lambda: AggregatingStateDescriptor(name, Last(), value),
    }
    d = descriptors[s.kind]()
    if s.ttl:
        d.enable_time_to_live(OUR_TTL)
    return d


def _fill(
    backend: HeapKeyedStateBackend, clock: ManualTimeProvider, name: str, s: WindowState, scope: Any
) -> None:
    key, ns = scope
    backend.set_current_key(key)
    state = backend.get_partitioned_state(ns, _descriptor(name, s))
    value = s.entries[scope]
    if s.kind in ("VALUE", "REDUCING", "AGGREGATING"):
        if s.ttl:
            clock.now, value = value[1], value[0]
        (state.update if s.kind == "VALUE" else state.add)(value)
    elif s.kind == "LIST":
        for element in value:
            if s.ttl:
                clock.now, element = element[1], element[0]
            state.add(element)
    else:
        for user_key, v in value.items():
            if s.ttl:
                clock.now, v = v[1], v[0]
            state.put(user_key, v)


def _timers(backend: HeapKeyedStateBackend, name: str, timers: set[tuple[Any, Any, int]], owned: Any) -> None:
    domain = TimeDomain.EVENT_TIME if name.startswith("_timer_state/event_") else TimeDomain.PROCESSING_TIME
    queue = TimerQueue(backend, domain) if name.endswith("_user-timers") else None
    for key, ns, timestamp in sorted(timers, key=repr):
        if not owned(key):
            continue
        backend.set_current_key(key)
        if queue is not None:  # the process runner's timers
            queue.register(timestamp)
        else:  # a window operator's: a timer map state in the window's namespace
            desc = MapStateDescriptor(name, Types.LONG(), Types.BOOLEAN())
            backend.get_partitioned_state(ns, desc).put(timestamp, True)


def build_checkpoint(path: str) -> CompletedCheckpoint:
    """Our checkpoint of :func:`model` at ``path`` (parallelism 2, max parallelism 128)."""
    pending = CheckpointStorage(path).begin()
    for uid, op in model().items():
        key_type = _type(op.key_type)
        for i in range(SOURCE_PARALLELISM):
            rng = compute_key_group_range_for_operator_index(128, SOURCE_PARALLELISM, i)
            clock = ManualTimeProvider(LIVE_TS)
            backend = HeapKeyedStateBackend(key_type=key_type, key_group_range=rng, time_provider=clock)

            def owned(key: Any, rng: Any = rng, key_type: Any = key_type) -> bool:
                return assign_to_key_group(key, 128, key_type) in rng

            for name, s in op.states.items():
                for scope in s.entries:
                    if owned(scope[0]):
                        _fill(backend, clock, name, s, scope)
            for name, timers in op.timers.items():
                _timers(backend, name, timers, owned)
            clock.now = LIVE_TS
            pending.write_keyed(uid, backend, i, SOURCE_PARALLELISM)
    pending.commit()
    ckpt = open_checkpoint(path)
    assert isinstance(ckpt, CompletedCheckpoint)
    return ckpt


def namespace_of(ns: Any) -> Any:
    """A namespace as compared: a TimeWindow (start, end), the GlobalWindow "GlobalWindow", void None;
    our reader's structs (dicts) become tuples."""
    return tuple(ns.values()) if isinstance(ns, dict) else ns


Row = tuple[str, str, Any, Any, Any, Any, Any]  # uid, state, key, namespace, position/user key, value, ts


def rows(uids: Any = None, live_only: bool = False) -> set[Row]:
    """Every (uid, state, key, namespace, position or user key, value, TTL timestamp) of the model."""
    out = set()
    for uid, op in model().items():
        if uids is not None and uid not in uids:
            continue
        for name, s in op.states.items():
            for (key, ns), value in s.entries.items():
                if s.kind == "LIST":
                    items: list[tuple[Any, Any]] = list(enumerate(value))
                elif s.kind == "MAP":
                    items = list(value.items())
                else:
                    items = [(None, value)]
                position = 0
                for extra, v in items:
                    v, ts = v if s.ttl else (v, None)
                    if live_only and ts not in (None, LIVE_TS):
                        continue
                    if s.kind == "LIST":  # as Flink shows it: live elements only, renumbered
                        extra, position = position, position + 1
                    out.add(
                        (uid, name, key, ns, extra, canonical(v, s.value_type) if v is not None else None, ts)
                    )
    return out


def timers(uids: Any = None) -> set[tuple[str, str, Any, Any, int]]:
    """Every (uid, timer queue, key, namespace, timestamp) of the model."""
    return {
        (uid, name, *t)
        for uid, op in model().items()
        if uids is None or uid in uids
        for name, found in op.timers.items()
        for t in found
    }


#: What RestoreWindowsJob.java declares each operator of FLINK_UIDS as (its uid is its kind).
WINDOWS_JOB = Path(__file__).resolve().parents[2] / "fixtures" / "flink" / "RestoreWindowsJob.java"


def flink_spec(parallelism: dict[str, int], max_parallelism: dict[str, int]) -> str:
    """RestoreWindowsJob's spec of the operators of FLINK_UIDS and their per-window states (TTL
    ones with FLINK_TTL_MS)."""
    lines = []
    for uid in FLINK_UIDS:
        op = model()[uid]
        lines.append(f"{uid}\t{uid}\t{op.key_type}\t{parallelism[uid]}\t{max_parallelism[uid]}")
        for name, s in op.states.items():
            if name != "window-contents":
                ttl = FLINK_TTL_MS if s.ttl else 0
                lines.append(f"state\t{name}\t{s.kind}\t{s.value_type}\t{s.user_key_type}\t{ttl}")
    return "\n".join(lines) + "\n"


def expected_fired() -> set[tuple[Any, ...]]:
    """(uid, what fired, key, namespace, value or timestamp) of every window and timer Flink must fire."""
    ops = model()
    out: set[tuple[Any, ...]] = set()
    for uid in ("tumbling", "global"):
        for (key, ns), value in ops[uid].states["window-contents"].entries.items():
            out.add((uid, "window", key, ns, None, value))
    for uid, name, key, ns, extra, value, _ in rows(["tumbling", "global"], live_only=True):
        if name != "window-contents":
            out.add((uid, f"state:{name}", key, ns, extra, value))
    for name, found in ops["timers"].timers.items():
        domain = "EVENT_TIME" if name.startswith("_timer_state/event_") else "PROCESSING_TIME"
        out |= {("timers", domain, key, ns, None, ts) for key, ns, ts in found}
    return out


def parse_fired(
    lines: list[str], parallelism: dict[str, int], max_parallelism: dict[str, int]
) -> list[tuple[Any, ...]]:
    """What RestoreWindowsJob printed, as expected_fired gives it; each line's key group and
    subtask checked against ours."""
    out = []
    ops = model()
    for line in lines:
        uid, subtask, kg, what, key_text, ns_text, extra_text, value_text = line.split("\t")
        key_type = ops[uid].key_type
        key: Any = unescape(key_text) if key_type == "STRING" else int(key_text)
        assert int(kg) == assign_to_key_group(key, max_parallelism[uid], getattr(Types, key_type)())
        assert int(subtask) == compute_operator_index_for_key_group(
            max_parallelism[uid], parallelism[uid], int(kg)
        )
        ns: Any = None
        if ns_text == "GlobalWindow":
            ns = ns_text
        elif ns_text != "-":
            ns = tuple(int(b) for b in ns_text.split(","))
        extra: Any = None
        if what.startswith("state:"):
            s = ops[uid].states[what[len("state:") :]]
            if s.kind == "LIST":
                extra = int(extra_text)
            elif s.kind == "MAP":
                extra = parse_value(extra_text, s.user_key_type)
            value = parse_value(value_text, s.value_type)
        else:
            value = int(value_text)
        out.append((uid, what, key, ns, extra, value))
    return out
