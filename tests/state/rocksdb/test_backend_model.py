"""Property tests: the RocksDB backend against the heap backend as the model, on random
operation sequences (every kind, namespaces, merges, clears, write batches on and off,
with and without TTL while the clock moves), with snapshots taken at random moments and
compared with the heap's snapshot of the same moment."""

from __future__ import annotations

import shutil
import tempfile
from contextlib import ExitStack
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from flinkstate.state import (
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    RocksDBKeyedStateBackend,
    StateTtlConfig,
    Time,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.ttl import ManualTimeProvider

from state_functions import Average

TTL_MS = 100


def descriptors(ttl: StateTtlConfig | None) -> dict[str, Any]:
    descs: dict[str, Any] = {
        "v": ValueStateDescriptor("v", Types.STRING()),
        "l": ListStateDescriptor("l", Types.LONG()),
        "m": MapStateDescriptor("m", Types.STRING(), Types.LONG()),
        "r": ReducingStateDescriptor("r", lambda a, b: a + b, Types.LONG()),
        "a": AggregatingStateDescriptor("a", Average(), Types.LIST(Types.LONG())),
    }
    if ttl is not None:
        for desc in descs.values():
            desc.enable_time_to_live(ttl)
    return descs


KEYS = st.one_of(st.integers(-3, 40), st.just(2**40))
NAMESPACES = st.sampled_from([None, None, 1, 2, 3])
TEXT = st.text(max_size=4)
LONGS = st.integers(-(2**63), 2**63 - 1)


def contents(snapshot: Any) -> dict[tuple[str, Any, Any], Any]:
    out: dict[tuple[str, Any, Any], Any] = {}
    for name, state in snapshot.states.items():
        for kg in snapshot.key_group_range:
            for e in state.entries(kg):
                out[(name, e.key, e.namespace)] = (e.value, e.timestamp)
    return out


class BackendsAgree(RuleBasedStateMachine):
    ttl: StateTtlConfig | None = None

    @initialize(max_p=st.sampled_from([4, 200]))
    def setup(self, max_p: int) -> None:
        self.dir = tempfile.mkdtemp(prefix="flinkstate-model-")
        self.clock = ManualTimeProvider(1_000)
        self.d = descriptors(self.ttl)
        self.heap = HeapKeyedStateBackend(max_parallelism=max_p, time_provider=self.clock)
        self.rocks = RocksDBKeyedStateBackend(
            self.dir + "/db", max_parallelism=max_p, time_provider=self.clock
        )
        self.snapshots: list[tuple[Any, Any]] = []
        self.batch = ExitStack()

    @rule(ms=st.integers(1, TTL_MS))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(max_entries=st.integers(1, 5))
    def toggle_write_batch(self, max_entries: int) -> None:
        """RocksDB writes in write batches for a while: reads must still see them."""
        if self.rocks._buffer is None:
            self.batch.enter_context(self.rocks.write_batch(max_entries))
        else:
            self.batch.close()

    def _both(self, key: int, ns: Any, desc: Any) -> tuple[Any, Any]:
        out = []
        for b in (self.heap, self.rocks):
            b.set_current_key(key)
            out.append(b.get_partitioned_state(ns, desc))
        return out[0], out[1]

    @rule(key=KEYS, ns=NAMESPACES, value=TEXT | st.none())
    def update_value(self, key: int, ns: Any, value: str | None) -> None:
        for s in self._both(key, ns, self.d["v"]):
            s.update(value)

    @rule(key=KEYS, ns=NAMESPACES, values=st.lists(st.integers(-9, 9), max_size=3), how=st.integers(0, 2))
    def list_write(self, key: int, ns: Any, values: list[int], how: int) -> None:
        for s in self._both(key, ns, self.d["l"]):
            if how == 0:
                s.update(values)
            elif how == 1:
                s.add_all(values)
            else:
                for v in values:
                    s.add(v)

    @rule(key=KEYS, ns=NAMESPACES, user_key=st.sampled_from(["a", "b", "é", ""]), value=LONGS | st.none())
    def map_put(self, key: int, ns: Any, user_key: str, value: int | None) -> None:
        for s in self._both(key, ns, self.d["m"]):
            s.put(user_key, value)

    @rule(key=KEYS, ns=NAMESPACES, entries=st.dictionaries(st.sampled_from("abc"), st.integers(0, 5)))
    def map_put_all(self, key: int, ns: Any, entries: dict[str, int]) -> None:
        for s in self._both(key, ns, self.d["m"]):
            s.put_all(entries)

    @rule(key=KEYS, ns=NAMESPACES, user_key=st.sampled_from(["a", "b", "é"]))
    def map_remove(self, key: int, ns: Any, user_key: str) -> None:
        for s in self._both(key, ns, self.d["m"]):
            s.remove(user_key)

    @rule(key=KEYS, ns=NAMESPACES, value=st.integers(-5, 5) | st.none(), agg=st.booleans())
    def add(self, key: int, ns: Any, value: int | None, agg: bool) -> None:
        for s in self._both(key, ns, self.d["a" if agg else "r"]):
            s.add(value)

    @rule(key=KEYS, name=st.sampled_from("lra"), into=NAMESPACES, sources=st.lists(NAMESPACES))
    def merge(self, key: int, name: str, into: Any, sources: list[Any]) -> None:
        if into is None or None in sources:
            return
        for s in self._both(key, into, self.d[name]):
            s.merge_namespaces(into, sources)

    @rule(key=KEYS, ns=NAMESPACES, name=st.sampled_from("vlmra"))
    def clear(self, key: int, ns: Any, name: str) -> None:
        for s in self._both(key, ns, self.d[name]):
            s.clear()

    @rule(key=KEYS, ns=NAMESPACES)
    def read(self, key: int, ns: Any) -> None:
        h, r = self._both(key, ns, self.d["v"])
        assert h.value() == r.value()
        h, r = self._both(key, ns, self.d["l"])
        assert list(h.get()) == list(r.get())
        h, r = self._both(key, ns, self.d["m"])
        assert dict(h.items()) == dict(r.items())
        assert sorted(h.keys()) == sorted(r.keys()) and h.is_empty() == r.is_empty()
        assert all(h.get(k) == r.get(k) and h.contains(k) == r.contains(k) for k in ("a", "b", "z"))
        for name in "ra":
            h, r = self._both(key, ns, self.d[name])
            assert h.get() == r.get()

    @rule()
    def take_snapshot(self) -> None:
        self.snapshots.append((self.heap.snapshot(), self.rocks.snapshot()))

    @precondition(lambda self: self.snapshots)
    @rule(index=st.integers(0, 10))
    def check_snapshot(self, index: int) -> None:
        heap, rocks = self.snapshots.pop(index % len(self.snapshots))
        assert contents(rocks) == contents(heap)
        for name, state in heap.states.items():
            assert rocks.states[name].meta == state.meta
        heap.release()
        rocks.release()

    @invariant()
    def keys_agree(self) -> None:
        if not hasattr(self, "heap"):
            return
        assert self.rocks.state_names() == self.heap.state_names()
        for name in self.heap.state_names():
            for ns in (None, 1, 2):
                assert sorted(self.rocks.get_keys(name, ns)) == sorted(self.heap.get_keys(name, ns))

    def teardown(self) -> None:
        if not hasattr(self, "heap"):
            return
        try:
            for heap, rocks in self.snapshots:
                assert contents(rocks) == contents(heap)
            assert contents(self.rocks.snapshot()) == contents(self.heap.snapshot())
        finally:
            self.batch.close()
            self.heap.close()
            self.rocks.close()
            shutil.rmtree(self.dir, ignore_errors=True)


class BackendsAgreeWithTtl(BackendsAgree):
    """The same with TTL on every state (renewed on reads, expired values returned until
    removed, dropped from snapshots); background cleanup off, so both hold the same entries."""

    ttl = (
        StateTtlConfig.new_builder(Time.milliseconds(TTL_MS))
        .update_ttl_on_read_and_write()
        .return_expired_if_not_cleaned_up()
        .cleanup_full_snapshot()
        .disable_cleanup_in_background()
        .build()
    )


TestBackendsAgree = BackendsAgree.TestCase
TestBackendsAgree.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestBackendsAgreeWithTtl = BackendsAgreeWithTtl.TestCase
TestBackendsAgreeWithTtl.settings = settings(
    max_examples=40, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
