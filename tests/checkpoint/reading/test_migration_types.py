"""Type migration when restored state is registered with changed descriptors: compatible
changes migrate the values (all kinds, namespaces, TTL, both heap maps, at another
parallelism); incompatible ones are typed errors that leave the state intact."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.state import (
    AggregateFunction,
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateConflictError,
    StateDescriptor,
    StateMigrationError,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.ttl import ManualTimeProvider

OLD_ROW = Types.ROW_NAMED(["n", "f"], [Types.INT(), Types.FLOAT()])
NEW_ROW = Types.ROW_NAMED(["n", "f", "note"], [Types.LONG(), Types.DOUBLE(), Types.STRING()])
OLD_NEST = Types.ROW_NAMED(["inner", "tags"], [OLD_ROW, Types.LIST(Types.SHORT())])
NEW_NEST = Types.ROW_NAMED(
    ["inner", "tags", "extra"], [NEW_ROW, Types.LIST(Types.LONG()), Types.MAP(Types.STRING(), Types.INT())]
)
TTL = StateTtlConfig.new_builder(datetime.timedelta(seconds=10)).build()
CLOCK = ManualTimeProvider(5_000_000)
KEYS = [f"k{i}" for i in range(16)]


class SumAcc(AggregateFunction[Any, Any, Any]):
    def create_accumulator(self) -> Any:
        return (0, 0.0)

    def add(self, value: Any, accumulator: Any) -> Any:
        return (accumulator[0] + value, accumulator[1] + 0.5)

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])


def descriptors(new: bool, ttl: bool) -> dict[str, StateDescriptor]:
    """The old types, or the widened ones (same names)."""
    i, f, row, nest = (
        (Types.LONG(), Types.DOUBLE(), NEW_ROW, NEW_NEST)
        if new
        else (Types.INT(), Types.FLOAT(), OLD_ROW, OLD_NEST)
    )
    byte_to = Types.LONG() if new else Types.BYTE()
    descs: dict[str, StateDescriptor] = {
        "int": ValueStateDescriptor("int", i),
        "float": ValueStateDescriptor("float", f),
        "byte": ValueStateDescriptor("byte", byte_to),
        "row": ValueStateDescriptor("row", row),
        "nest": ValueStateDescriptor("nest", nest),
        "list": ListStateDescriptor("list", row),
        "list_of_lists": ListStateDescriptor("list_of_lists", Types.LIST(i)),
        "map": MapStateDescriptor("map", i, Types.LIST(row)),
        "map_value": ValueStateDescriptor("map_value", Types.MAP(Types.STRING(), Types.MAP(i, row))),
        "reducing": ReducingStateDescriptor("reducing", lambda a, b: a + b, i),
        "aggregating": AggregatingStateDescriptor("aggregating", SumAcc(), Types.TUPLE([i, f])),
    }
    if ttl:
        for desc in descs.values():
            desc.enable_time_to_live(TTL)
    return descs


def write(backend: HeapKeyedStateBackend, ttl: bool) -> None:
    d = descriptors(new=False, ttl=ttl)
    for n, key in enumerate(KEYS):
        CLOCK.now = 5_000_000 + n
        backend.set_current_key(key)
        for ns in (None, ("w", n % 2)):
            backend.get_partitioned_state(ns, d["int"]).update(n)
            backend.get_partitioned_state(ns, d["float"]).update(n + 0.25)
            backend.get_partitioned_state(ns, d["byte"]).update(-n)
            backend.get_partitioned_state(ns, d["row"]).update((n, None if n % 2 else 1.5))
            backend.get_partitioned_state(ns, d["nest"]).update(
                ((n, 0.5), [n, None]) if n % 3 else (None, None)
            )
            backend.get_partitioned_state(ns, d["list"]).add_all([(n, 2.5), (None, None)])
            backend.get_partitioned_state(ns, d["list_of_lists"]).add_all([[n, None], []])
            backend.get_partitioned_state(ns, d["map"]).put_all({n: [(n, 0.75), None], -1: None})
            backend.get_partitioned_state(ns, d["map_value"]).update({"a": {n: (n, 1.0), 7: None}})
            backend.get_partitioned_state(ns, d["reducing"]).add(n)
            backend.get_partitioned_state(ns, d["reducing"]).add(1)
            backend.get_partitioned_state(ns, d["aggregating"]).add(n)


def expected(n: int) -> dict[str, Any]:
    """What the widened descriptors read for key ``k{n}`` (either namespace)."""
    row = (n, None if n % 2 else 1.5, None)
    return {
        "int": n,
        "float": n + 0.25,
        "byte": -n,
        "row": row,
        "nest": ((n, 0.5, None), [n, None], None) if n % 3 else (None, None, None),
        "list": [(n, 2.5, None), (None, None, None)],
        "list_of_lists": [[n, None], []],
        "map": {n: [(n, 0.75, None), None], -1: None},
        "map_value": {"a": {n: (n, 1.0, None), 7: None}},
        "reducing": n + 1,
        "aggregating": (n, 0.5),
    }


def read(
    backend: HeapKeyedStateBackend, descs: dict[str, StateDescriptor], key: str, ns: Any
) -> dict[str, Any]:
    backend.set_current_key(key)
    out = {}
    for name, desc in descs.items():
        state = backend.get_partitioned_state(ns, desc)
        if isinstance(desc, ListStateDescriptor):
            out[name] = list(state.get())
        elif isinstance(desc, MapStateDescriptor):
            out[name] = dict(state.items())
        elif isinstance(desc, ValueStateDescriptor):
            out[name] = state.value()
        else:
            out[name] = state.get()
    return out


def checkpoint(backend: HeapKeyedStateBackend) -> CompletedCheckpoint:
    pending = CheckpointStorage(f"memory://migration/{uuid.uuid4().hex}").begin()
    pending.write_keyed("op", backend)
    return pending.commit()


def snapshot_of(backend: HeapKeyedStateBackend) -> dict[tuple[str, Any, Any], Any]:
    with backend.snapshot() as snap:
        return {
            (name, e.key, e.namespace): (e.value, e.timestamp)
            for name, state in snap.states.items()
            for kg in snap.key_group_range
            for e in state.entries(kg)
        }


@pytest.mark.parametrize("ttl", [False, True], ids=["plain", "ttl"])
@pytest.mark.parametrize("async_snapshots", [True, False], ids=["cow", "nested"])
def test_compatible_changes_migrate_every_kind(async_snapshots: bool, ttl: bool) -> None:
    backend = HeapKeyedStateBackend(
        key_type=Types.STRING(), time_provider=CLOCK, async_snapshots=async_snapshots
    )
    write(backend, ttl)
    done = checkpoint(backend)
    CLOCK.now = 5_000_000 + 100
    new = descriptors(new=True, ttl=ttl)
    parts = [
        done.keyed_backend("op", i, 2, time_provider=CLOCK, async_snapshots=async_snapshots) for i in range(2)
    ]
    for n, key in enumerate(KEYS):
        part = next(p for p in parts if key in set(p.get_keys("int")))
        for ns in (None, ("w", n % 2)):
            assert read(part, new, key, ns) == expected(n), (key, ns)
    # the migrated values are stored in the new types: wide values fit, and a checkpoint
    # records the new types and the same TTL timestamps
    part = next(p for p in parts if "k3" in set(p.get_keys("int")))
    part.set_current_key("k3")
    part.get_state(new["int"]).update(2**40)
    part.get_reducing_state(new["reducing"]).add(2**40)
    part.get_map_state(new["map"]).put(2**41, [(2**42, 1e300, "wide")])
    again = checkpoint(part)
    metas = {m.name: m for m in again.manifest.operators[0].keyed_states}
    assert metas["row"].value_type == NEW_ROW and metas["nest"].value_type == NEW_NEST
    assert metas["map"].user_key_type == Types.LONG() and metas["aggregating"].value_type == Types.TUPLE(
        [Types.LONG(), Types.DOUBLE()]
    )
    restored = again.keyed_backend("op", 0, 1, time_provider=CLOCK)
    assert snapshot_of(restored) == snapshot_of(part)
    values = read(restored, new, "k3", None)
    assert values["int"] == 2**40 and values["reducing"] == 4 + 2**40
    assert values["map"][2**41] == [(2**42, 1e300, "wide")]
    if ttl:  # timestamps came through the migration: k3 was written at 5_000_003
        CLOCK.now = 5_000_003 + 10_000
        assert read(restored, new, "k3", ("w", 1))["row"] is None


def test_changed_ttl_duration_applies_to_the_restored_timestamps() -> None:
    backend = HeapKeyedStateBackend(key_type=Types.STRING(), time_provider=CLOCK)
    write(backend, ttl=True)
    done = checkpoint(backend)
    longer = ValueStateDescriptor("int", Types.INT())
    longer.enable_time_to_live(StateTtlConfig.new_builder(datetime.timedelta(minutes=5)).build())
    CLOCK.now = 5_000_000 + 60_000  # expired under the old 10 s, live under 5 min
    restored = done.keyed_backend("op", 0, 1, time_provider=CLOCK)
    restored.set_current_key("k5")
    assert restored.get_state(longer).value() == 5


MIGRATION, KIND = "STATE_MIGRATION", "STATE_KIND_CONFLICT"
INT, FLT, SHORT = Types.INT(), Types.FLOAT(), Types.SHORT()
INCOMPATIBLE: list[tuple[str, StateDescriptor, str]] = [
    ("int to string", ValueStateDescriptor("int", Types.STRING()), MIGRATION),
    ("int to short", ValueStateDescriptor("int", SHORT), MIGRATION),
    ("int to double", ValueStateDescriptor("int", Types.DOUBLE()), MIGRATION),
    ("float to int", ValueStateDescriptor("float", INT), MIGRATION),
    ("row field removed", ValueStateDescriptor("row", Types.ROW_NAMED(["n"], [INT])), MIGRATION),
    ("row field renamed", ValueStateDescriptor("row", Types.ROW_NAMED(["n", "g"], [INT, FLT])), MIGRATION),
    ("row fields reordered", ValueStateDescriptor("row", Types.ROW_NAMED(["f", "n"], [FLT, INT])), MIGRATION),
    (
        "row field added in front",
        ValueStateDescriptor("row", Types.ROW_NAMED(["x", "n", "f"], [INT, INT, FLT])),
        MIGRATION,
    ),
    ("row to tuple", ValueStateDescriptor("row", Types.TUPLE([INT, FLT])), MIGRATION),
    (
        "field added to a tuple",
        AggregatingStateDescriptor("aggregating", SumAcc(), Types.TUPLE([INT, FLT, INT])),
        MIGRATION,
    ),
    (
        "nested field narrowed",
        ListStateDescriptor("list", Types.ROW_NAMED(["n", "f"], [SHORT, FLT])),
        MIGRATION,
    ),
    ("list element changed", ListStateDescriptor("list_of_lists", Types.LIST(Types.STRING())), MIGRATION),
    ("list to array", ListStateDescriptor("list_of_lists", Types.PRIMITIVE_ARRAY(INT)), MIGRATION),
    ("map user key changed", MapStateDescriptor("map", Types.STRING(), Types.LIST(OLD_ROW)), MIGRATION),
    ("map value changed", MapStateDescriptor("map", INT, Types.LIST(Types.LIST(OLD_ROW))), MIGRATION),
    ("value to list", ListStateDescriptor("int", INT), KIND),
    ("value to reducing", ReducingStateDescriptor("int", lambda x, y: x, INT), KIND),
    ("list to map", MapStateDescriptor("list", INT, OLD_ROW), KIND),
    ("map to value", ValueStateDescriptor("map", INT), KIND),
    (
        "aggregating to reducing",
        ReducingStateDescriptor("aggregating", lambda x, y: x, Types.TUPLE([INT, FLT])),
        KIND,
    ),
]


@pytest.fixture(scope="module")
def plain_and_ttl() -> dict[bool, CompletedCheckpoint]:
    out = {}
    for ttl in (False, True):
        backend = HeapKeyedStateBackend(key_type=Types.STRING(), time_provider=CLOCK)
        write(backend, ttl)
        out[ttl] = checkpoint(backend)
    return out


@pytest.mark.parametrize(("change", "desc", "code"), INCOMPATIBLE, ids=[c[0] for c in INCOMPATIBLE])
def test_incompatible_changes_are_typed_errors_that_leave_state_intact(
    plain_and_ttl: dict[bool, CompletedCheckpoint], change: str, desc: StateDescriptor, code: str
) -> None:
    backend = plain_and_ttl[False].keyed_backend("op", 0, 1)
    before = snapshot_of(backend)
    error = StateMigrationError if code == MIGRATION else StateConflictError
    with pytest.raises(error, match=rf"^\[{code}\]") as info:
        backend.get_partitioned_state(None, desc)
    assert info.value.code == code
    assert snapshot_of(backend) == before  # nothing half-migrated
    new = descriptors(new=True, ttl=False)  # and the compatible change still migrates
    assert read(backend, new, "k4", ("w", 0)) == expected(4)
    assert read(backend, new, "k5", None) == expected(5)


@pytest.mark.parametrize("restored_ttl", [False, True], ids=["ttl-added", "ttl-removed"])
def test_adding_or_removing_ttl_is_a_migration_error(
    plain_and_ttl: dict[bool, CompletedCheckpoint], restored_ttl: bool
) -> None:
    backend = plain_and_ttl[restored_ttl].keyed_backend("op", 0, 1, time_provider=CLOCK)
    for name, desc in descriptors(new=False, ttl=not restored_ttl).items():
        with pytest.raises(StateMigrationError, match=r"^\[STATE_MIGRATION\].*TTL"):
            backend.get_partitioned_state(None, desc)
        assert name in backend.state_names()
    CLOCK.now = 5_000_000
    assert read(backend, descriptors(new=False, ttl=restored_ttl), "k1", None)["int"] == 1


@pytest.mark.parametrize("max_parallelism", [64, 129, 32768])
def test_restoring_into_another_max_parallelism_is_refused(
    plain_and_ttl: dict[bool, CompletedCheckpoint], max_parallelism: int
) -> None:
    target = HeapKeyedStateBackend(key_type=Types.STRING(), max_parallelism=max_parallelism)
    with pytest.raises(StateMigrationError, match=r"^\[STATE_MIGRATION\].*max parallelism 128") as info:
        plain_and_ttl[False].restore_keyed(target, "op")
    assert info.value.code == "STATE_MIGRATION"
    assert target.state_names() == []


def test_restoring_into_another_key_type_is_refused(plain_and_ttl: dict[bool, CompletedCheckpoint]) -> None:
    for key_type in (Types.LONG(), Types.ROW_NAMED(["s"], [Types.STRING()])):
        with pytest.raises(StateMigrationError, match=r"^\[STATE_MIGRATION\].*key type"):
            plain_and_ttl[False].keyed_backend("op", 0, 1, key_type=key_type)
    same = plain_and_ttl[False].keyed_backend("op", 0, 1, key_type=Types.STRING())
    assert len(list(same.get_keys("int"))) == len(KEYS)
