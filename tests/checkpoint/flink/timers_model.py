"""The timers TimersJob.java registers (tests/fixtures/flink/timers_*): a plain-Python model, and
the timers of a Flink savepoint and of our checkpoint as one set to compare."""

from __future__ import annotations

from typing import Any

from flink_model import made

from flinkstate.checkpoint import CompletedCheckpoint
from flinkstate.checkpoint.flink import FlinkSavepoint
from flinkstate.state import Types, assign_to_key_group

LONG_MAX = (1 << 63) - 1
FAR = 4_102_444_800_000  # 2100-01-01: TimersJob's processing-time timers never fired
EVENT, PROCESSING = "_timer_state/event_user-timers", "_timer_state/processing_user-timers"
#: TimersJob's operators: uid -> (key type, max parallelism)
OPERATORS = {"timers": (Types.LONG(), 128), "timers-names": (Types.STRING(), 256)}
TIMER_KINDS = ("timers_heap", "timers_rocksdb", "timers_rocksdb_native")
WINDOW_KINDS = ("heap_canonical", "rocksdb_canonical", "rocksdb_native")


def name(n: int) -> str:
    """TimersJob.name: the String key of element n."""
    return ("b\u00f6-" if n % 2 == 0 else "tab\there-") + str(n) + ("\U0001f600" if n % 4 == 0 else "")


def model(uid: str) -> set[tuple[str, int, Any, Any, int]]:
    """(queue, key group, key, namespace, timestamp) of every timer of ``uid``."""
    key_type, max_p = OPERATORS[uid]
    out = set()
    for n in range(20):
        key = n if uid == "timers" else name(n)
        kg = assign_to_key_group(key, max_p, key_type)
        out |= {(EVENT, kg, key, None, t) for t in (-5, n * 1000, LONG_MAX)}
        if n % 3 == 0:
            out.add((PROCESSING, kg, key, None, FAR + n))
    return out


def flink_timers(sp: FlinkSavepoint, uid: str) -> set[tuple[str, int, Any, Any, int]]:
    """Every timer of ``uid`` our Flink reader lists (its timer queues decoded)."""
    header = sp.keyed_header(uid)
    assert header is not None
    return {
        (q.name, kg, key, ns, ts)
        for q in header.states
        if q.is_timer
        for rows in sp.decode_timers(uid, q.name)
        for kg, key, ns, ts in zip(rows.key_group, rows.key, rows.namespace, rows.value, strict=True)
    }


def our_timers(ck: CompletedCheckpoint, uid: str) -> set[tuple[str, int, Any, Any, int]]:
    """Every timer of ``uid`` in our checkpoint, read from its files (timer map states); a
    TimeWindow namespace (a struct) as the tuple (start, end)."""
    out = set()
    op = ck.operator(uid)
    for meta in op.keyed_states:
        if not meta.name.startswith("_timer_state/"):
            continue
        for kg, tables in ck.read_keyed(uid, meta.name):
            for table in tables:
                for r in table.to_pylist():
                    assert r["value"] is True
                    ns = r.get("namespace")
                    ns = tuple(ns.values()) if isinstance(ns, dict) else ns
                    out.add((meta.name, kg, r["key"], ns, r["user_key"]))
    return out


def sources(kinds: tuple[str, ...]) -> list[Any]:
    """(version, kind) of every fixture of ``kinds``."""
    return made(kinds)
