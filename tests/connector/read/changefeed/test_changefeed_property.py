"""The change feed over random operations on every backend (heap with either map, RocksDB):
every state kind, namespaces, TTL expiry (incremental cleanup and full-snapshot cleanup),
compactions, aborted and full checkpoints. A range is answered exactly or refused."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from feed_model import applied, feed, kind_of, restored
from incremental_ops import Workload

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.connector.errors import ChangeFeedError
from flinkstate.state import KeyGroupRange, assign_to_key_group
from flinkstate.state.ttl.time import ManualTimeProvider

MAX_P = 32


def _job(make_backend: Any, root: Path, seed: int) -> tuple[Workload, list[int], set[int]]:
    """One subtask of two with a random key-group range; 9 checkpoints (some aborted, the
    sixth in full on purpose): the completed ones and the one written in full."""
    fates = random.Random(seed)
    start = fates.randrange(MAX_P - 4)
    rng = KeyGroupRange(start, fates.randrange(start + 2, MAX_P))
    clock = ManualTimeProvider(1_000)
    backend = make_backend(max_parallelism=MAX_P, key_group_range=rng, time_provider=clock)
    keys = [k for k in range(2_000) if assign_to_key_group(k, MAX_P) in rng][:30]
    work = Workload(seed, keys, clock)
    storage = CheckpointStorage(str(root), retain=50, incremental=True, max_chain_files=3,
                                max_chain_bytes_ratio=3.0)  # fmt: skip
    done: list[int] = []
    full: set[int] = set()
    for i in range(9):
        work.run(backend, 90)
        pending = storage.begin(incremental=i != 5)
        pending.write_keyed("op", backend, subtask=1, parallelism=2)
        if i not in (0, 5) and fates.random() < 0.2:
            pending.abort()
            continue
        done.append(pending.commit().checkpoint_id)
        if i == 5:
            full.add(done[-1])
    return work, done, full


@pytest.mark.parametrize("seed", [4, 9])
def test_the_feed_applied_to_the_start_gives_the_end(make_backend: Any, tmp_path: Path, seed: int) -> None:
    work, done, full = _job(make_backend, tmp_path, seed)
    states = {c: restored(tmp_path, c) for c in done}
    pick = random.Random(seed)
    answered = refused = 0
    for state in work.desc:
        kind = kind_of(tmp_path, done[-1], state)
        ranges = {(s, s) for s in done[1:]} | {(s, done[-1]) for s in done[1:]}
        for s, e in sorted(ranges):
            try:
                rows = feed(tmp_path, state, s, e)
            except ChangeFeedError as exc:
                # only a checkpoint written in full records no changes; a state held in full
                # in every checkpoint is compared with the one before instead
                assert state != "ttl_full" and full & set(range(s, e + 1)), str(exc)
                refused += 1
                continue
            answered += 1
            before = states[max(c for c in done if c < s)].get(state, {})
            assert applied(kind, before, rows) == states[e].get(state, {}), (state, s, e)
            if (s, e) == (done[1], done[-1]):  # key selection: the same rows of those keys
                keys = pick.sample(work.keys, 5)
                some = feed(tmp_path, state, s, e, keys=repr(keys))
                assert some == [r for r in rows if r["key"] in keys]
    assert answered > refused > 0
