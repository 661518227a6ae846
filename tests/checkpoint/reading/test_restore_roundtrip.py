"""Every keyed state kind, key type and value type through a checkpoint and back.

State is written through the state API, checkpointed, restored into a fresh backend of
the same heap map, and read back through the state API with descriptors registered
after the restore: it must read exactly as before.
"""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import dump

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, open_checkpoint
from flinkstate.state import (
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    TypeInformation,
    Types,
    ValueStateDescriptor,
)

from state_functions import Collect

UTC = datetime.timezone.utc
ROW = Types.ROW_NAMED(["id", "name", "tags"], [Types.LONG(), Types.STRING(), Types.LIST(Types.INT())])

VALUE_TYPES: dict[str, tuple[TypeInformation, list[Any]]] = {
    "row": (ROW, [(1, "a", [1, None]), (None, None, None), (-7, "", [])]),
    "tuple": (Types.TUPLE([Types.INT(), Types.STRING()]), [(1, "x"), (-2, "")]),
    "list": (Types.LIST(Types.STRING()), [["a", None, "b"], []]),
    "map": (Types.MAP(Types.STRING(), Types.LONG()), [{"x": 1, "y": None}, {}]),
    "nested": (
        Types.MAP(Types.STRING(), Types.LIST(ROW)),
        [{"k": [(1, "a", []), None]}, {"e": []}],
    ),
    "big_dec": (Types.BIG_DEC(), [Decimal("12.345"), Decimal("-0.000000000000000001")]),
    "date": (Types.SQL_DATE(), [datetime.date(2020, 2, 29), datetime.date(1969, 12, 31)]),
    "timestamp": (Types.SQL_TIMESTAMP(), [datetime.datetime(2021, 3, 4, 5, 6, 7, 890123)]),
    "instant": (Types.INSTANT(), [datetime.datetime(1999, 12, 31, 23, 59, 59, 1, tzinfo=UTC)]),
    "time": (Types.SQL_TIME(), [datetime.time(13, 14, 15, 16000)]),
    "bytes": (Types.PRIMITIVE_ARRAY(Types.BYTE()), [b"", b"\x00\xff\x10"]),
    "pickled": (Types.PICKLED_BYTE_ARRAY(), [{"set": frozenset({1, 2})}, [None, 1.5]]),
    "long": (Types.LONG(), [2**63 - 1, -(2**63), 0]),
    "int": (Types.INT(), [2**31 - 1, -(2**31)]),
    "double": (Types.DOUBLE(), [1.5, -0.0, float("inf")]),
    "float": (Types.FLOAT(), [0.5, -2.25]),
    "boolean": (Types.BOOLEAN(), [True, False]),
    "string": (Types.STRING(), ["", "h\u00e9llo \U0001f600"]),
}

KEY_TYPES: dict[str, tuple[TypeInformation, list[Any]]] = {
    "string": (Types.STRING(), ["", "alice", "b\u00f8b", *(f"user-{i}" for i in range(12))]),
    "long": (Types.LONG(), [0, -1, 2**40, 2**63 - 1, *range(100, 112)]),
    "int": (Types.INT(), [0, -(2**31), 2**31 - 1, *range(7, 19)]),
    "row": (
        Types.ROW_NAMED(["user", "n"], [Types.STRING(), Types.INT()]),
        [("", 0), *((f"u{i}", i) for i in range(14))],
    ),
}


def descriptors(name: str, t: TypeInformation) -> dict[str, StateDescriptor]:
    """One descriptor of each kind holding values of ``t``."""
    return {
        "value": ValueStateDescriptor(f"{name}-value", t),
        "list": ListStateDescriptor(f"{name}-list", t),
        "map": MapStateDescriptor(f"{name}-map", Types.STRING(), t),
        "reducing": ReducingStateDescriptor(f"{name}-reducing", lambda a, b: b, t),
        "aggregating": AggregatingStateDescriptor(f"{name}-aggregating", Collect(), Types.LIST(t)),
    }


def namespace_of(type_name: str, i: int) -> Any:
    """The non-void namespace used for a value type (types of namespaces vary by state)."""
    return (f"w{i % 3}", i % 2) if len(type_name) % 2 else i % 4


Expected = dict[tuple[str, Any, Any], Any]


def write_state(backend: HeapKeyedStateBackend, keys: list[Any], types: list[str]) -> Expected:
    """Every kind of each value type, void and namespaced; returns what reads should give."""
    expected: Expected = {}
    for i, key in enumerate(keys):
        backend.set_current_key(key)
        for name in types:
            t, values = VALUE_TYPES[name]
            descs = descriptors(name, t)
            for ns in (None, namespace_of(name, i)):
                first, second = values[i % len(values)], values[(i + 1) % len(values)]
                backend.get_partitioned_state(ns, descs["value"]).update(first)
                backend.get_partitioned_state(ns, descs["list"]).add_all([first, second])
                backend.get_partitioned_state(ns, descs["map"]).put_all({"a": first, "none": None})
                reducing = backend.get_partitioned_state(ns, descs["reducing"])
                reducing.add(second)
                reducing.add(first)
                aggregating = backend.get_partitioned_state(ns, descs["aggregating"])
                aggregating.add(first)
                aggregating.add(second)
                expected[(descs["value"].name, key, ns)] = first
                expected[(descs["list"].name, key, ns)] = [first, second]
                expected[(descs["map"].name, key, ns)] = {"a": first, "none": None}
                expected[(descs["reducing"].name, key, ns)] = first
                expected[(descs["aggregating"].name, key, ns)] = [first, second]
    return expected


def read_state(backend: HeapKeyedStateBackend, keys: list[Any], types: list[str]) -> Expected:
    """What the state API returns for every state, key and namespace :func:`write_state` used."""
    out: Expected = {}
    for i, key in enumerate(keys):
        backend.set_current_key(key)
        for name in types:
            descs = descriptors(name, VALUE_TYPES[name][0])
            for ns in (None, namespace_of(name, i)):
                out[(descs["value"].name, key, ns)] = backend.get_partitioned_state(
                    ns, descs["value"]
                ).value()
                out[(descs["list"].name, key, ns)] = list(
                    backend.get_partitioned_state(ns, descs["list"]).get()
                )
                out[(descs["map"].name, key, ns)] = dict(
                    backend.get_partitioned_state(ns, descs["map"]).items()
                )
                for kind in ("reducing", "aggregating"):
                    out[(descs[kind].name, key, ns)] = backend.get_partitioned_state(ns, descs[kind]).get()
    return out


def checkpoint(
    backend: HeapKeyedStateBackend, url: str, options: dict[str, Any] | None = None
) -> CompletedCheckpoint:
    pending = CheckpointStorage(url, options).begin()
    pending.write_keyed("op", backend)
    pending.commit()
    return open_checkpoint(url, options, allow_pickle=True)


# every value type with LONG keys; the other key types with a few structured value types
CASES = [("long", sorted(VALUE_TYPES))] + [
    (kind, ["row", "nested", "pickled", "instant", "bytes"]) for kind in ("string", "int", "row")
]


@pytest.mark.parametrize("async_snapshots", [True, False], ids=["cow", "nested"])
@pytest.mark.parametrize(("key_kind", "types"), CASES, ids=[c[0] for c in CASES])
def test_every_kind_and_type_reads_back_the_same(
    tmp_path: Path, async_snapshots: bool, key_kind: str, types: list[str]
) -> None:
    key_type, keys = KEY_TYPES[key_kind]
    backend = HeapKeyedStateBackend(key_type=key_type, async_snapshots=async_snapshots)
    expected = write_state(backend, keys, types)
    before = dump(backend)
    assert len(before) == len(expected)

    restored = checkpoint(backend, str(tmp_path / "root")).keyed_backend(
        "op", 0, 1, async_snapshots=async_snapshots
    )
    assert restored.key_type == key_type
    assert dump(restored) == before  # the same entries before any descriptor is registered
    assert read_state(restored, keys, types) == expected
    assert dump(restored) == before  # registration and reads changed nothing
    for name in ("row-value", "pickled-map", "nested-list"):
        assert sorted(map(repr, restored.get_keys(name))) == sorted(map(repr, keys))
    assert sorted(map(repr, restored.get_keys("row-list", namespace_of("row", 1)))) == sorted(
        repr(k) for i, k in enumerate(keys) if namespace_of("row", i) == namespace_of("row", 1)
    )


@pytest.mark.parametrize("async_snapshots", [True, False], ids=["cow", "nested"])
def test_restored_state_checkpoints_again_unchanged(async_snapshots: bool) -> None:
    key_type, keys = KEY_TYPES["row"]
    types = ["row", "map", "big_dec", "pickled"]
    backend = HeapKeyedStateBackend(key_type=key_type, async_snapshots=async_snapshots)
    expected = write_state(backend, keys, types)
    before = dump(backend)
    first = checkpoint(backend, f"memory://roundtrip/{uuid.uuid4().hex}")
    restored = first.keyed_backend("op", 0, 1, async_snapshots=async_snapshots)
    assert (
        read_state(restored, keys[:3], types[:2])
        == {  # registers some states, not all
            k: v for k, v in expected.items() if k[1] in keys[:3] and k[0].split("-")[0] in types[:2]
        }
    )
    second = checkpoint(restored, f"memory://roundtrip/{uuid.uuid4().hex}")
    assert second.manifest.operators[0].keyed_states == first.manifest.operators[0].keyed_states
    again = second.keyed_backend("op", 0, 1, async_snapshots=not async_snapshots)
    assert dump(again) == before
    assert read_state(again, keys, types) == expected


@pytest.mark.parametrize("async_snapshots", [True, False], ids=["cow", "nested"])
def test_an_empty_state_and_an_untouched_backend_restore(
    location: tuple[str, dict[str, Any]], async_snapshots: bool
) -> None:
    root, options = location
    backend = HeapKeyedStateBackend(key_type=Types.STRING(), async_snapshots=async_snapshots)
    value = ValueStateDescriptor("emptied", Types.LONG())
    backend.set_current_key("k")
    backend.get_state(value).update(1)
    backend.get_state(value).clear()
    backend.get_list_state(ListStateDescriptor("never-written", Types.STRING()))
    restored = checkpoint(backend, f"{root}/a", options).keyed_backend("op", 0, 1)
    assert sorted(restored.state_names()) == ["emptied", "never-written"]
    restored.set_current_key("k")
    assert restored.get_state(value).value() is None
    assert list(restored.get_list_state(ListStateDescriptor("never-written", Types.STRING())).get()) == []

    untouched = HeapKeyedStateBackend(async_snapshots=async_snapshots)
    fresh = checkpoint(untouched, f"{root}/b", options).keyed_backend("op", 0, 1)
    assert fresh.state_names() == [] and fresh.key_type is None
    fresh.set_current_key("any")  # the key type is still free to be inferred
    assert fresh.key_type == Types.STRING()


def test_a_restored_heap_map_is_sized_for_its_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restore puts each key group's entries into a table sized for them: no rehash
    starts while they are put, and every entry reads back."""
    from flinkstate.state.heap.cow_map import CopyOnWriteStateMap

    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=2)
    value = ValueStateDescriptor("v", Types.STRING())
    for k in range(5_000):
        backend.set_current_key(k)
        backend.get_state(value).update(f"ключ{k}" if k % 7 else None)
    completed = checkpoint(backend, str(tmp_path / "root"))
    started: list[int] = []
    start = CopyOnWriteStateMap._start_rehash
    monkeypatch.setattr(CopyOnWriteStateMap, "_start_rehash", lambda m: (started.append(len(m)), start(m)))
    restored = completed.keyed_backend("op", 0, 1)
    assert started == []
    for k in range(5_000):
        restored.set_current_key(k)
        assert restored.get_state(value).value() == (f"ключ{k}" if k % 7 else None)
    assert all(not m.is_rehashing for m in restored.table("v").maps if isinstance(m, CopyOnWriteStateMap))
