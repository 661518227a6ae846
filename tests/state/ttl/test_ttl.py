"""TTL contract with a manual clock: every kind x update type x visibility, on every backend."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from flinkstate.state import (
    AggregatingStateDescriptor,
    FlinkStateError,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    Time,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.ttl import ManualTimeProvider

from state_functions import Average

TTL = 100
UPDATE_TYPES = [
    StateTtlConfig.UpdateType.OnCreateAndWrite,
    StateTtlConfig.UpdateType.OnReadAndWrite,
]
VISIBILITIES = [
    StateTtlConfig.StateVisibility.NeverReturnExpired,
    StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp,
]


def config(update: Any = UPDATE_TYPES[0], visibility: Any = VISIBILITIES[0], **extra: Any) -> Any:
    builder = (
        StateTtlConfig.new_builder(datetime.timedelta(milliseconds=TTL))
        .set_update_type(update)
        .set_state_visibility(visibility)
    )
    for name, args in extra.items():
        getattr(builder, name)(*args)
    return builder.build()


def with_ttl(desc: Any, cfg: Any) -> Any:
    desc.enable_time_to_live(cfg)
    return desc


@pytest.fixture
def clock() -> ManualTimeProvider:
    return ManualTimeProvider(10_000)


# Each kind: (descriptor factory, write(state, i), read(state) -> value or None when empty)
KINDS: dict[str, tuple[Any, Any, Any]] = {
    "value": (
        lambda: ValueStateDescriptor("s", Types.LONG()),
        lambda s, i: s.update(i),
        lambda s: s.value(),
    ),
    "list": (
        lambda: ListStateDescriptor("s", Types.LONG()),
        lambda s, i: s.add(i),
        lambda s: list(s.get()) or None,
    ),
    "map": (
        lambda: MapStateDescriptor("s", Types.STRING(), Types.LONG()),
        lambda s, i: s.put("k", i),
        lambda s: s.get("k"),
    ),
    "reducing": (
        lambda: ReducingStateDescriptor("s", lambda a, b: a + b, Types.LONG()),
        lambda s, i: s.add(i),
        lambda s: s.get(),
    ),
    "aggregating": (
        lambda: AggregatingStateDescriptor("s", Average(), Types.LIST(Types.LONG())),
        lambda s, i: s.add(i),
        lambda s: s.get(),
    ),
}


def _state(backend: Any, kind: str, cfg: Any) -> Any:
    desc = with_ttl(KINDS[kind][0](), cfg)
    return backend.get_partitioned_state(None, desc)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("update", UPDATE_TYPES, ids=["on-write", "on-read"])
@pytest.mark.parametrize("visibility", VISIBILITIES, ids=["never", "return-expired"])
def test_expiry_matrix(make_backend: Any, clock: Any, kind: str, update: Any, visibility: Any) -> None:
    b = make_backend(time_provider=clock)
    # no background cleanup: it would remove the expired value before a read could see it
    state = _state(b, kind, config(update, visibility, disable_cleanup_in_background=()))
    _, write, read = KINDS[kind]
    b.set_current_key("a")
    write(state, 4)
    fresh = read(state)
    assert fresh is not None
    clock.advance(TTL - 1)  # ttl - 1: alive; on-read refreshes here
    assert read(state) == fresh
    clock.advance(1)  # ttl after the write
    on_read = update == UPDATE_TYPES[1]
    if on_read:
        assert read(state) == fresh  # the read at ttl-1 renewed it
        clock.advance(TTL)
    returned = read(state)
    if visibility == VISIBILITIES[1]:
        assert returned == fresh  # returned once ...
    else:
        assert returned is None
    assert read(state) is None  # ... and gone afterwards
    assert list(b.get_keys("s")) == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_boundary_instants(make_backend: Any, clock: Any, kind: str) -> None:
    for offset, alive in ((TTL - 1, True), (TTL, False), (TTL + 1, False)):
        b = make_backend(time_provider=ManualTimeProvider(0))
        state = _state(b, kind, config())
        b.set_current_key(1)
        KINDS[kind][1](state, 3)
        b.time_provider.now = offset
        assert (KINDS[kind][2](state) is not None) == alive, (kind, offset)


def test_writes_renew_and_reads_do_not_on_create_and_write(make_backend: Any, clock: Any) -> None:
    b = make_backend(time_provider=clock)
    state = _state(b, "value", config())
    b.set_current_key(1)
    state.update(1)
    clock.advance(60)
    assert state.value() == 1
    clock.advance(60)
    assert state.value() is None  # the read at 60 did not extend it
    state.update(2)
    clock.advance(60)
    state.update(3)  # a write renews
    clock.advance(60)
    assert state.value() == 3


def test_list_elements_expire_one_by_one(make_backend: Any, clock: Any) -> None:
    b = make_backend(time_provider=clock)
    state = _state(b, "list", config())
    b.set_current_key(1)
    state.add(1)
    clock.advance(50)
    state.add_all([2, 3])
    clock.advance(50)
    assert list(state.get()) == [2, 3]
    clock.advance(50)
    assert list(state.get()) == []
    state.update([7])
    assert list(state.get()) == [7]


def test_map_entries_expire_one_by_one(make_backend: Any, clock: Any) -> None:
    b = make_backend(time_provider=clock)
    state = _state(b, "map", config(visibility=VISIBILITIES[1], disable_cleanup_in_background=()))
    b.set_current_key(1)
    state.put("a", 1)
    clock.advance(50)
    state.put_all({"b": 2})
    clock.advance(50)
    assert sorted(state.items()) == [("a", 1), ("b", 2)]  # 'a' expired: returned once
    assert sorted(state.items()) == [("b", 2)]
    assert state.contains("b") and not state.contains("a")
    assert sorted(state.keys()) == ["b"] and list(state.values()) == [2]
    clock.advance(50)
    assert not state.is_empty()  # 'b' expired: returned once more
    assert state.is_empty()
    assert list(b.get_keys("s")) == []


def test_expired_reducing_and_aggregating_start_afresh(make_backend: Any, clock: Any) -> None:
    b = make_backend(time_provider=clock)
    red = b.get_reducing_state(
        with_ttl(ReducingStateDescriptor("r", lambda a, c: a + c, Types.LONG()), config())
    )
    agg = b.get_aggregating_state(
        with_ttl(AggregatingStateDescriptor("a", Average(), Types.LIST(Types.LONG())), config())
    )
    b.set_current_key(1)
    red.add(5)
    agg.add(10)
    clock.advance(TTL)
    red.add(1)
    agg.add(2)
    assert red.get() == 1 and agg.get() == 2.0


def test_get_keys_is_ttl_blind(make_backend: Any, clock: Any) -> None:
    b = make_backend(time_provider=clock)
    state = _state(b, "value", config(disable_cleanup_in_background=()))
    for k in range(10):
        b.set_current_key(k)
        state.update(k)
    clock.advance(TTL)
    assert sorted(b.get_keys("s")) == list(range(10))  # expired but not cleaned up
    b.set_current_key(3)
    assert state.value() is None
    assert sorted(b.get_keys("s")) == [k for k in range(10) if k != 3]


def _fill(b: Any, state: Any, n: int, write: Any) -> None:
    for k in range(n):
        b.set_current_key(k)
        write(state, k)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_incremental_cleanup_removes_unread_entries(make_backend: Any, clock: Any, kind: str) -> None:
    n, size = 3000, 10
    b = make_backend(time_provider=clock, max_parallelism=8)
    state = _state(b, kind, config(cleanup_incrementally=(size, False)))
    _fill(b, state, n, KINDS[kind][1])
    b.set_current_key(n + 1)
    KINDS[kind][2](state)
    clock.advance(TTL)
    accesses = 0
    while accesses < n // size:
        KINDS[kind][2](state)  # reads of one other key only
        accesses += 1
        if accesses == n // size // 2:
            left = len(list(b.get_keys("s")))
            assert n // 4 < left < n  # about half is gone half way
    assert list(b.get_keys("s")) == []


def test_cleanup_for_every_record(make_backend: Any, clock: Any) -> None:
    b = make_backend(time_provider=clock)
    state = _state(b, "value", config(cleanup_incrementally=(5, True)))
    _fill(b, state, 1000, KINDS["value"][1])
    clock.advance(TTL)
    for _ in range(200):
        b.set_current_key(5000)  # key selection alone drives the cleanup
    assert list(b.get_keys("s")) == []


def test_no_background_cleanup_when_disabled(make_backend: Any, clock: Any) -> None:
    b = make_backend(time_provider=clock)
    state = _state(b, "value", config(disable_cleanup_in_background=()))
    _fill(b, state, 500, KINDS["value"][1])
    clock.advance(TTL)
    b.set_current_key(9999)
    for _ in range(1000):
        state.value()
    assert len(list(b.get_keys("s"))) == 500


def test_cleanup_keeps_partially_expired_lists(make_backend: Any, clock: Any) -> None:
    b = make_backend(time_provider=clock)
    state = _state(b, "list", config(cleanup_incrementally=(50, False)))
    _fill(b, state, 200, KINDS["list"][1])
    clock.advance(60)
    for k in range(0, 200, 2):
        b.set_current_key(k)
        state.add(-k)
    clock.advance(60)
    b.set_current_key(10_000)
    for _ in range(20):
        state.get()
    assert sorted(b.get_keys("s")) == list(range(0, 200, 2))
    b.set_current_key(4)
    assert list(state.get()) == [-4]


def test_cleanup_while_snapshot_is_held(make_backend: Any, clock: Any) -> None:
    b = make_backend(time_provider=clock, max_parallelism=4)
    state = _state(b, "list", config(cleanup_incrementally=(100, False)))
    _fill(b, state, 800, KINDS["list"][1])
    snapshot = b.snapshot()
    clock.advance(TTL)
    b.set_current_key(10_000)
    for _ in range(50):
        state.get()
    assert list(b.get_keys("s")) == []
    seen = {e.key: (e.value, e.timestamp) for kg in range(4) for e in snapshot.states["s"].entries(kg)}
    assert seen == {k: ([k], [10_000]) for k in range(800)}
    snapshot.release()


def test_full_snapshot_cleanup_drops_expired(make_backend: Any, clock: Any) -> None:
    b = make_backend(time_provider=clock, max_parallelism=2)
    plain = _state(b, "value", config(disable_cleanup_in_background=()))
    full = b.get_map_state(
        with_ttl(MapStateDescriptor("m", Types.STRING(), Types.LONG()), config(cleanup_full_snapshot=()))
    )
    for k in range(10):
        b.set_current_key(k)
        plain.update(k)
        full.put("old", k)
    clock.advance(TTL // 2)
    for k in range(5):
        b.set_current_key(k)
        full.put("new", k)
    clock.advance(TTL // 2)
    with b.snapshot() as snap:
        values = [e for kg in range(2) for e in snap.states["s"].entries(kg)]
        maps = {e.key: (e.value, e.timestamp) for kg in range(2) for e in snap.states["m"].entries(kg)}
    assert len(values) == 10 and {e.timestamp for e in values} == {10_000}  # kept, timestamps kept
    assert maps == {k: ({"new": k}, {"new": 10_050}) for k in range(5)}
    assert snap.states["m"].meta.ttl is not None


def test_event_time_follows_the_watermark(make_backend: Any) -> None:
    b = make_backend()
    cfg = (
        StateTtlConfig.new_builder(Time.milliseconds(TTL))
        .use_event_time()
        .disable_cleanup_in_background()
        .build()
    )
    state = b.get_state(with_ttl(ValueStateDescriptor("e", Types.LONG()), cfg))
    b.set_current_key(1)
    assert state.value() is None
    with pytest.raises(FlinkStateError, match="NO_WATERMARK"):
        state.update(1)
    b.advance_watermark(1_000)
    state.update(1)
    b.advance_watermark(500)  # watermarks never go back
    assert b.current_watermark == 1_000
    b.advance_watermark(1_000 + TTL - 1)
    assert state.value() == 1
    b.advance_watermark(1_000 + TTL)
    assert state.value() is None


def test_merge_namespaces_with_ttl(make_backend: Any, clock: Any) -> None:
    b = make_backend(time_provider=clock)
    desc = with_ttl(ReducingStateDescriptor("r", lambda a, c: a + c, Types.LONG()), config())
    b.set_current_key(1)
    b.get_partitioned_state(1, desc).add(1)
    clock.advance(TTL)  # namespace 1 expired
    b.get_partitioned_state(2, desc).add(2)
    b.get_partitioned_state(3, desc).add(3)
    state = b.get_partitioned_state(3, desc)
    state.merge_namespaces(3, [1, 2])
    assert state.get() == 5


def test_invalid_configs() -> None:
    for bad in (datetime.timedelta(0), datetime.timedelta(milliseconds=-5), Time.seconds(0), 100):
        with pytest.raises(FlinkStateError, match="INVALID_TTL"):
            StateTtlConfig.new_builder(bad)
    builder = StateTtlConfig.new_builder(Time.seconds(1))
    for size in (0, -1):
        with pytest.raises(FlinkStateError, match="INVALID_TTL"):
            builder.cleanup_incrementally(size, False)
    with pytest.raises(FlinkStateError, match="INVALID_TTL"):
        builder.cleanup_in_rocksdb_compact_filter(0)
    with pytest.raises(FlinkStateError, match="INVALID_TTL"):
        ValueStateDescriptor("x", Types.LONG()).enable_time_to_live("1s")  # type: ignore[arg-type]


def test_ttl_on_operator_state_is_refused() -> None:
    from flinkstate.state.operator import OperatorStateBackend

    desc = with_ttl(ListStateDescriptor("offsets", Types.LONG()), config())
    with pytest.raises(FlinkStateError, match="TTL_NOT_SUPPORTED"):
        OperatorStateBackend().get_list_state(desc)


def test_disabled_config_means_no_ttl(make_backend: Any, clock: Any) -> None:
    cfg = (
        StateTtlConfig.new_builder(Time.seconds(1))
        .set_update_type(StateTtlConfig.UpdateType.Disabled)
        .build()
    )
    desc = with_ttl(ValueStateDescriptor("v", Types.LONG()), cfg)
    assert desc.ttl_config is None
    b = make_backend(time_provider=clock)
    b.set_current_key(1)
    b.get_state(desc).update(1)
    clock.advance(10**9)
    assert b.get_state(desc).value() == 1


def test_ttl_registration_must_match(make_backend: Any) -> None:
    b = make_backend()
    b.get_state(ValueStateDescriptor("v", Types.LONG()))
    with pytest.raises(FlinkStateError, match="STATE_MIGRATION"):
        b.get_state(with_ttl(ValueStateDescriptor("v", Types.LONG()), config()))


def test_config_json_round_trip() -> None:
    cfg = config(UPDATE_TYPES[1], VISIBILITIES[1], cleanup_incrementally=(7, True), cleanup_full_snapshot=())
    assert StateTtlConfig.from_json(cfg.to_json()) == cfg
