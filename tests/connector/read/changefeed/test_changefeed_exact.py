"""Change-feed ranges that were once answered wrong without a word: a state emptied by a
full checkpoint, TTL expiry of a state held in full in every checkpoint, and the checkpoint
named for a corrupt file."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from feed_model import applied, feed, restored

from flinkstate.checkpoint import CheckpointCorruptError, CheckpointStorage
from flinkstate.connector.errors import ChangeFeedError
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    StateKind,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.ttl.time import ManualTimeProvider

VALUE = ValueStateDescriptor("v", Types.LONG())


def _checkpoint(storage: CheckpointStorage, backends: Any, **kw: Any) -> int:
    """A checkpoint of one backend, or of a list of them (subtask i of their number)."""
    backends = backends if isinstance(backends, list) else [backends]
    pending = storage.begin(**kw)
    for i, backend in enumerate(backends):
        pending.write_keyed("op", backend, subtask=i, parallelism=len(backends))
    return pending.commit().checkpoint_id


def _put(backends: Any, values: dict[int, int | None]) -> None:
    """Sets (``None``: clears) each key's value in the backend owning it."""
    for key, value in values.items():
        backend = next(
            b for b in (backends if isinstance(backends, list) else [backends])
            if assign_to_key_group(key, b.max_parallelism) in b.key_group_range
        )  # fmt: skip
        backend.set_current_key(key)
        if value is None:
            backend.get_state(VALUE).clear()
        else:
            backend.get_state(VALUE).update(value)


@pytest.mark.parametrize("emptied", ["full", "restore", "rescale"])
def test_a_state_emptied_in_a_full_checkpoint_is_refused(tmp_path: Path, emptied: str) -> None:
    """An empty state writes no file: a full checkpoint where it became empty must not read
    as 'no change'."""
    backend: Any = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=8)
    storage = CheckpointStorage(str(tmp_path), retain=10, incremental=True)
    _put(backend, {1: 10})
    _checkpoint(storage, backend)
    _put(backend, {2: 20})
    _checkpoint(storage, backend)
    if emptied != "full":  # a restored backend checkpoints in full first (rescaled: 2 subtasks)
        parallelism = 2 if emptied == "rescale" else 1
        backend = [storage.load(2).keyed_backend("op", i, parallelism) for i in range(parallelism)]
    _put(backend, {1: None, 2: None})
    third = _checkpoint(storage, backend, incremental=emptied != "full")
    assert restored(tmp_path, third) == {}
    for start in (2, 3):
        with pytest.raises(ChangeFeedError, match=r"\[CHANGE_FEED_UNAVAILABLE\].*checkpoints after 3"):
            feed(tmp_path, "v", start, 3)
    _put(backend, {3: 30})
    _checkpoint(storage, backend)
    assert applied(StateKind.VALUE, restored(tmp_path, 3).get("v", {}), feed(tmp_path, "v", 4)) == {
        (3, None): (30, None)
    }


def test_a_state_empty_before_and_after_a_full_checkpoint_has_no_changes(tmp_path: Path) -> None:
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=8)
    storage = CheckpointStorage(str(tmp_path), retain=10, incremental=True)
    _put(backend, {1: 10})
    _checkpoint(storage, backend)
    _put(backend, {1: None})
    _checkpoint(storage, backend, incremental=False)  # emptied: no file
    _checkpoint(storage, backend, incremental=False)  # empty before and after
    with pytest.raises(ChangeFeedError, match=r"checkpoint 2 holds no file .* while checkpoint 1 holds"):
        feed(tmp_path, "v", 2)
    assert feed(tmp_path, "v", 3) == []
    storage.retain = 1
    storage.cleanup()  # checkpoint 2 is gone: whether 3 emptied the state cannot be told
    with pytest.raises(ChangeFeedError, match=r"checkpoint before 3, which is not retained"):
        feed(tmp_path, "v", 3)


def _ttl(descriptor: Any) -> Any:
    ttl = StateTtlConfig.new_builder(timedelta(milliseconds=50)).cleanup_full_snapshot()
    descriptor.enable_time_to_live(ttl.disable_cleanup_in_background().build())
    return descriptor


@pytest.mark.parametrize("kind", [StateKind.VALUE, StateKind.LIST, StateKind.MAP])
def test_expiry_of_a_state_held_in_full_shows_as_deletes(
    make_backend: Any, tmp_path: Path, kind: StateKind
) -> None:
    """TTL with cleanup_full_snapshot: expiry is never a recorded change, only the full
    files show it; the feed gives the difference from the checkpoint before."""
    clock = ManualTimeProvider(1_000)
    backend = make_backend(key_type=Types.LONG(), max_parallelism=8, time_provider=clock)
    storage = CheckpointStorage(str(tmp_path), retain=10, incremental=True)
    descriptors = {
        StateKind.VALUE: lambda: backend.get_state(_ttl(ValueStateDescriptor("s", Types.LONG()))),
        StateKind.LIST: lambda: backend.get_list_state(_ttl(ListStateDescriptor("s", Types.LONG()))),
        StateKind.MAP: lambda: backend.get_map_state(
            _ttl(MapStateDescriptor("s", Types.STRING(), Types.LONG()))
        ),
    }

    def write(key: int, value: int) -> None:
        backend.set_current_key(key)
        state = descriptors[kind]()
        if kind is StateKind.VALUE:
            state.update(value)
        elif kind is StateKind.LIST:
            state.add(value)
        else:
            state.put(f"u{value % 2}", value)

    write(1, 10)
    write(2, 20)
    _checkpoint(storage, backend)
    write(3, 30)
    clock.advance(30)
    write(2, 21)  # a list or map changed in part: 2's first entry expires before the next
    _checkpoint(storage, backend)
    clock.advance(30)  # 1 and 3 (and 2's first entry) expire
    write(4, 40)
    _checkpoint(storage, backend)
    clock.advance(60)  # everything expires, nothing is written: a delete for every scope
    _checkpoint(storage, backend)
    states = {c: restored(tmp_path, c).get("s", {}) for c in (1, 2, 3, 4)}
    assert set(states[3]) == {(2, None), (4, None)} and states[4] == {}
    for start in (2, 3, 4):
        for end in range(start, 5):
            assert applied(kind, states[start - 1], feed(tmp_path, "s", start, end)) == states[end]


def test_a_corrupt_file_names_the_checkpoint_that_references_it(tmp_path: Path) -> None:
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=8)
    storage = CheckpointStorage(str(tmp_path), retain=10, incremental=True)
    for i in range(4):
        _put(backend, {k: k * 10 + i for k in range(20)})
        _checkpoint(storage, backend)
    victim = next((tmp_path / "chk-2").glob("*-d-*.parquet"))
    victim.write_bytes(victim.read_bytes()[:-20] + b"x" * 20)
    with pytest.raises(CheckpointCorruptError, match=r"\[CHECKPOINT_CORRUPT\]") as info:
        feed(tmp_path, "v", 2, 4)
    assert victim.name in str(info.value) and "referenced by checkpoint 2 in" in str(info.value)
    assert "chk-2" in str(info.value)
