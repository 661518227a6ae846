"""``rewrite_max_parallelism``: a savepoint moved to another max parallelism has every key
in its new key group and the same keyed, operator and raw operator state."""

from __future__ import annotations

import datetime
import uuid
from collections import Counter
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, open_checkpoint
from flinkstate.checkpoint.writing.rewrite import rewrite_max_parallelism
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    StateMigrationError,
    StateTtlConfig,
    TypeInformation,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index as key_groups_of
from flinkstate.state.operator import OperatorStateBackend
from flinkstate.state.ttl import ManualTimeProvider

CLOCK = ManualTimeProvider(9_000_000)
VALUE = ValueStateDescriptor("value", Types.ROW_NAMED(["n", "s"], [Types.LONG(), Types.STRING()]))
VALUE.enable_time_to_live(StateTtlConfig.new_builder(datetime.timedelta(hours=1)).build())
LIST = ListStateDescriptor("list", Types.STRING())
MAP = MapStateDescriptor("map", Types.STRING(), Types.PICKLED_BYTE_ARRAY())
SPLIT = ListStateDescriptor("split", Types.LONG())
UNION = ListStateDescriptor("union", Types.STRING())
BROADCAST = MapStateDescriptor("broadcast", Types.LONG(), Types.STRING())
KEY_TYPES: dict[str, tuple[TypeInformation, list[Any]]] = {
    "string": (Types.STRING(), [f"key-{i}" for i in range(200)]),
    "row": (
        Types.ROW_NAMED(["a", "b"], [Types.STRING(), Types.INT()]),
        [(f"a{i % 9}", i) for i in range(200)],
    ),
}


def write_source(url: str, key_type: TypeInformation, keys: list[Any], p: int, max_p: int) -> None:
    pending = CheckpointStorage(url).begin()
    for i in range(p):
        rng = key_groups_of(max_p, p, i)
        keyed = HeapKeyedStateBackend(
            key_type=key_type, max_parallelism=max_p, key_group_range=rng, time_provider=CLOCK
        )
        for n, key in enumerate(keys):
            if assign_to_key_group(key, max_p, key_type) not in rng:
                continue
            CLOCK.now = 9_000_000 + n
            keyed.set_current_key(key)
            keyed.get_state(VALUE).update((n, str(key)))
            keyed.get_partitioned_state(n % 4, LIST).add_all([f"{n}", f"{n}!"])
            keyed.get_map_state(MAP).put("obj", {"n": n, "set": frozenset({n})})
        ops = OperatorStateBackend()
        ops.get_list_state(SPLIT).add_all([100 * i + j for j in range(i + 3)])
        ops.get_union_list_state(UNION).add(f"u{i}")
        ops.get_broadcast_state(BROADCAST).put_all({1: "one", 2: "two"})
        raw = [f"raw-{i}-{j}".encode() for j in range(2)]
        pending.write_subtask("op", i, p, max_p, keyed=keyed, operator=ops, raw_operator=raw)
    pending.commit()


def keyed_entries(checkpoint: CompletedCheckpoint, p: int) -> Counter[tuple[Any, ...]]:
    """Every keyed entry (with TTL timestamps) over ``p`` subtasks; checks each key's group."""
    max_p = checkpoint.manifest.operators[0].max_parallelism
    key_type = checkpoint.manifest.operators[0].key_type
    out: Counter[tuple[Any, ...]] = Counter()
    for i in range(p):
        backend = checkpoint.keyed_backend("op", i, p, time_provider=CLOCK)
        with backend.snapshot() as snap:
            for name, state in snap.states.items():
                for kg in snap.key_group_range:
                    for e in state.entries(kg):
                        assert assign_to_key_group(e.key, max_p, key_type) == kg, e.key
                        value = repr(e.value)  # lists, dicts of pickled objects: compared as text
                        out[(name, e.key, e.namespace, value, repr(e.timestamp))] += 1
    return out


def operator_state(checkpoint: CompletedCheckpoint, p: int) -> dict[str, Any]:
    backends = [checkpoint.operator_backend("op", i, p) for i in range(p)]
    return {
        "split": sorted(e for b in backends for e in b.get_list_state(SPLIT).get()),
        "union": [sorted(b.get_union_list_state(UNION).get()) for b in backends],
        "broadcast": [dict(b.get_broadcast_state(BROADCAST).items()) for b in backends],
        "raw": sorted(blob for i in range(p) for blob in checkpoint.raw_operator("op", i, p)),
    }


@pytest.mark.parametrize(
    ("key_kind", "p", "old_max", "new_max"),
    [("string", 3, 128, 32), ("row", 3, 128, 256), ("string", 3, 128, 2), ("row", 1, 16, 128)],
)
def test_rewrite_reassigns_every_key_and_keeps_all_state(
    key_kind: str, p: int, old_max: int, new_max: int
) -> None:
    key_type, keys = KEY_TYPES[key_kind]
    url = f"memory://rewrite/{uuid.uuid4().hex}"
    write_source(url, key_type, keys, p, old_max)
    source = open_checkpoint(url, allow_pickle=True)
    before = keyed_entries(source, 1)
    ops_before = operator_state(source, p)
    assert all(n == 1 for n in before.values()) and len(before) == 3 * len(keys)

    target_url = f"memory://rewrite/{uuid.uuid4().hex}/savepoint"
    rewritten = rewrite_max_parallelism(source, target_url, new_max)
    op = rewritten.manifest.operators[0]
    new_p = min(p, new_max)
    assert (op.max_parallelism, op.parallelism, rewritten.manifest.kind) == (new_max, new_p, "savepoint")
    assert [st.key_group_range for st in op.subtasks] == [
        (r.start, r.end) for r in (key_groups_of(new_max, new_p, i) for i in range(new_p))
    ]
    target = open_checkpoint(target_url, allow_pickle=True)
    assert keyed_entries(target, 1) == before  # every entry once, each key in its new group
    other = new_p + 2 if new_p + 2 <= new_max else 1
    assert keyed_entries(target, other) == before  # and at another parallelism
    after = operator_state(target, new_p)
    assert after["split"] == ops_before["split"]
    assert after["raw"] == ops_before["raw"]
    assert after["union"] == [sorted(f"u{i}" for i in range(p))] * new_p  # each element once, not p times
    assert after["broadcast"] == [{1: "one", 2: "two"}] * new_p
    # the restored state is usable through the state API with the new key groups
    backend = target.keyed_backend("op", 0, 1, time_provider=CLOCK)
    backend.set_current_key(keys[7])
    assert backend.get_current_key_group() == assign_to_key_group(keys[7], new_max, key_type)
    assert backend.get_state(VALUE).value() == (7, str(keys[7]))
    assert list(backend.get_partitioned_state(3, LIST).get()) == ["7", "7!"]
    assert backend.get_map_state(MAP).get("obj") == {"n": 7, "set": frozenset({7})}
    assert keyed_entries(open_checkpoint(url, allow_pickle=True), 1) == before  # the source is untouched


def test_rewrite_of_pickled_state_needs_permission() -> None:
    url = f"memory://rewrite/{uuid.uuid4().hex}"
    write_source(url, Types.STRING(), ["a", "b"], 1, 128)
    with pytest.raises(Exception, match=r"PICKLE_NOT_ALLOWED"):
        rewrite_max_parallelism(open_checkpoint(url), f"memory://rewrite/{uuid.uuid4().hex}/sp", 64)


def test_rewrite_refuses_raw_keyed_state_and_leaves_no_savepoint() -> None:
    url = f"memory://rewrite/{uuid.uuid4().hex}"
    pending = CheckpointStorage(url).begin()
    pending.write_subtask("op", 0, 1, 128, raw_keyed={5: b"opaque"}, key_group_range=key_groups_of(128, 1, 0))
    pending.commit()
    target = f"memory://rewrite/{uuid.uuid4().hex}/sp"
    with pytest.raises(StateMigrationError, match=r"^\[STATE_MIGRATION\].*raw keyed state"):
        rewrite_max_parallelism(open_checkpoint(url), target, 64)
    with pytest.raises(Exception, match="CHECKPOINT_NOT_FOUND"):
        open_checkpoint(target)


@pytest.mark.parametrize("runner_property", [True, False], ids=["runner watermark", "subtask watermarks"])
def test_rewrite_keeps_the_event_time_watermark(tmp_path: Any, runner_property: bool) -> None:
    """What a restore of the source treats as expired by event time, a restore of the
    rewritten savepoint does too (the watermark goes with it, per subtask and as the
    runner's property)."""
    from flinkstate.state import StateTtlConfig
    from flinkstate.state.ttl.config import Time

    desc = ValueStateDescriptor("v", Types.STRING())
    ttl = StateTtlConfig.new_builder(Time.milliseconds(1000)).use_event_time().never_return_expired()
    desc.enable_time_to_live(ttl.build())
    keys = [f"k{i}" for i in range(30)]
    storage = CheckpointStorage(str(tmp_path / "src"))
    pending = storage.begin()
    for i in range(2):
        backend = HeapKeyedStateBackend(
            key_type=Types.STRING(), max_parallelism=32, key_group_range=key_groups_of(32, 2, i)
        )
        for watermark, parity in ((100, 1), (5000, 0)):  # odd keys expire by 5500, even ones live
            backend.advance_watermark(watermark)
            for n, key in enumerate(keys):
                group = assign_to_key_group(key, 32, Types.STRING())
                if n % 2 == parity and group in backend.key_group_range:
                    backend.set_current_key(key)
                    backend.get_state(desc).update(f"é{n}")
        backend.advance_watermark(5500)
        pending.write_subtask("op", i, 2, 32, keyed=backend)
    # the runner's watermark (7000) expires every entry; the subtasks' (5500) the odd ones
    source = pending.commit({"flinkstate.process.watermark": "7000"} if runner_property else None)
    target = rewrite_max_parallelism(source, str(tmp_path / "dst"), 8)

    def live(checkpoint: CompletedCheckpoint) -> dict[str, Any]:
        out = {}
        p = checkpoint.operator("op").parallelism
        for i in range(p):
            backend = checkpoint.keyed_backend("op", i, p)
            for key in list(backend.get_keys("v")):
                backend.set_current_key(key)
                out[key] = backend.get_state(desc).value()
        return {k: v for k, v in out.items() if v is not None}

    expected = {} if runner_property else {k: f"é{n}" for n, k in enumerate(keys) if n % 2 == 0}
    assert live(source) == expected
    assert live(open_checkpoint(str(tmp_path / "dst"))) == live(target) == expected
