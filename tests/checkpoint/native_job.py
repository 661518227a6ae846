"""The state of the native RocksDB checkpoint tests (every kind, unicode keys, NaN, -0.0, None,
namespaces, TTL) and what they compare: entries by key group, a commit, the stored SST files.
Used by ``writing/`` (uploads, commits) and ``reading/`` (downloads)."""

from __future__ import annotations

import math
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    RocksDBKeyedStateBackend,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.ttl import ManualTimeProvider

VALUE = ValueStateDescriptor("v", Types.DOUBLE())
NAMES = MapStateDescriptor("names", Types.STRING(), Types.STRING())
ROWS = ListStateDescriptor("rows", Types.ROW_NAMED(["a", "b"], [Types.STRING(), Types.DOUBLE()]))
TOTAL = ReducingStateDescriptor("total", lambda a, b: a + b, Types.LONG())
SHORT = ValueStateDescriptor("short", Types.STRING())
SHORT.enable_time_to_live(StateTtlConfig.new_builder(timedelta(seconds=10)).build())
CLOCK = ManualTimeProvider(1_000_000)


def fill(backend: Any, keys: range, tag: str = "") -> None:
    """Unicode keys, NaN, -0.0, None, namespaces, TTL (some entries expire), every kind."""
    for n in keys:
        key = f"clé-{n}-日本"
        backend.set_current_key(key)
        CLOCK.now = 1_000_000 if n % 3 else 1_000_000 + 60_000  # every third written late: still alive
        backend.get_state(VALUE).update([math.nan, -0.0, float(n)][n % 3])
        backend.get_map_state(NAMES).put_all({f"ü{n}": None if n % 2 else f"wert{tag}", "": "leer"})
        backend.get_list_state(ROWS).add_all([(None, -0.0), (f"ß{n}", math.inf)][: 1 + n % 2])
        backend.get_reducing_state(TOTAL).add(n)
        backend.get_partitioned_state(("win", n % 4), TOTAL).add(-n)
        backend.get_state(SHORT).update(f"kurz{tag}")
    CLOCK.now = 1_000_000 + 65_000  # entries written at the start are expired now


def entries(backend: Any) -> list[tuple[Any, ...]]:
    """Every (state, key, namespace, value, timestamp), each in the key group it belongs to."""
    out = []
    with backend.snapshot() as snap:
        for name, state in snap.states.items():
            for kg in snap.key_group_range:
                for e in state.entries(kg):
                    assert assign_to_key_group(e.key, 128, snap.key_type) == kg
                    value = tuple(sorted(e.value.items())) if isinstance(e.value, dict) else e.value
                    value = tuple(value) if isinstance(value, list) else value
                    out.append((name, e.key, e.namespace, value, repr(e.timestamp)))
    return out


def comparable(backend: Any) -> Counter[Any]:
    """Entries with NaN made comparable (NaN != NaN)."""
    nan = "NaN"
    return Counter(
        tuple(nan if isinstance(x, float) and math.isnan(x) else x for x in e) for e in entries(backend)
    )


def rocks(tmp_path: Path, **kw: Any) -> RocksDBKeyedStateBackend:
    kw.setdefault("time_provider", CLOCK)
    return RocksDBKeyedStateBackend(tmp_path / f"db-{uuid.uuid4().hex[:8]}", **kw)


def commit(storage: CheckpointStorage, backend: Any) -> CompletedCheckpoint:
    pending = storage.begin()
    pending.write_subtask("op", 0, 1, 128, keyed=backend)
    return pending.commit()


def native_files(storage: CheckpointStorage) -> set[str]:
    return set(storage.storage.walk_files("_data/native"))
