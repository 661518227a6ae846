"""A state's diff between two of our checkpoints, against the model (:mod:`diff_model`: each
side read whole by the plain reader, compared as dicts): random programs over every state kind
on every backend, full and incremental, with nulls and unicode; filters; a rescaled max
parallelism; a self-diff; states that cannot be compared."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
from diff_model import applied, contents, expected_counts, read_whole
from incremental_ops import Workload, checkpoint_now
from support.backends import BackendFactory

from flinkstate.checkpoint import (
    CheckpointStorage,
    DiffSettings,
    SnapshotDiffError,
    diff_state,
    open_checkpoint,
    open_side,
    rewrite_max_parallelism,
)
from flinkstate.state import (
    AbstractKeyedStateBackend,
    HeapKeyedStateBackend,
    InvalidArgumentError,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.ttl.time import ManualTimeProvider
from flinkstate.state.types import key_token

MAX_P = 32
KEYS = ["alice", "bob", "", "ünï-😀", "Ω", "k:1", "k:2", "k:3", "日本", "z"]
NULLS = MapStateDescriptor("nulls", Types.STRING(), Types.STRING())
STATES = ["value", "list", "map", "sum", "windows", "ttl_value", "ttl_list", "ttl_map", "ttl_full", "nulls"]


def _nulls(backend: AbstractKeyedStateBackend, seed: int) -> None:
    """Map entries with null values and unicode user keys (beside the workload's states)."""
    for i, key in enumerate(KEYS):
        if (i + seed) % 3:
            backend.set_current_key(key)
            backend.get_map_state(NULLS).put(f"ü{(i * seed) % 4}", None if (i + seed) % 2 else f"v{seed}")


def _program(root: Path, make_backend: BackendFactory, seed: int, incremental: bool) -> list[str]:
    """Three checkpoints of one random program; their directories."""
    clock = ManualTimeProvider(0)
    backend = make_backend(key_type=Types.STRING(), max_parallelism=MAX_P, time_provider=clock)
    storage = CheckpointStorage(str(root), incremental=incremental)
    work = Workload(seed, KEYS, clock)
    out = []
    for round_ in range(3):
        work.run(backend, 120 if round_ == 0 else 25)
        _nulls(backend, seed + round_)
        out.append(checkpoint_now(storage, backend).directory.url)
    return out


def _check(old: str, new: str, state: str, settings: DiffSettings) -> Any:
    """The library's diff of ``state`` equals the model's; returns it."""
    found = diff_state(open_side(old), open_side(new), "op", state, settings)
    rows = [r for t in found.rows for r in t.to_pylist()]
    a = contents(read_whole(old, "op", state, settings.include_expired).to_pylist(), settings.compare_ttl)
    b = contents(read_whole(new, "op", state, settings.include_expired).to_pylist(), settings.compare_ttl)
    if settings.keys is not None:
        wanted = {key_token(k) for k in settings.keys}
        a, b = ({s: v for s, v in m.items() if s[0] in wanted} for m in (a, b))
    assert (found.added, found.removed, found.changed) == expected_counts(a, b), state
    assert applied(a, rows, settings.compare_ttl) == b, state
    return found


@pytest.mark.parametrize("incremental", [False, True], ids=["full", "incremental"])
@pytest.mark.parametrize("seed", [1, 2])
def test_random_programs_match_the_model(
    make_backend: BackendFactory, tmp_path: Path, seed: int, incremental: bool
) -> None:
    chk = _program(tmp_path / "root", make_backend, seed, incremental)
    skipped = changed = 0
    for old, new in ((chk[0], chk[1]), (chk[1], chk[2]), (chk[2], chk[0])):
        for state in STATES:
            for settings in (
                DiffSettings(include_expired=True),
                DiffSettings(compare_ttl=True, include_expired=True),
            ):
                found = _check(old, new, state, settings)
                skipped += found.skipped
                changed += not found.identical
            _check(old, new, state, DiffSettings())  # expired entries hidden on both sides
    assert changed, "the programs change something"
    if incremental:
        assert skipped, "key groups held by the same files on both sides are skipped"


def test_self_diff_is_empty_and_reads_no_shared_file(make_backend: BackendFactory, tmp_path: Path) -> None:
    chk = _program(tmp_path / "root", make_backend, 3, incremental=True)
    for state in STATES:
        found = diff_state(
            open_side(chk[2]), open_side(chk[2]), "op", state, DiffSettings(include_expired=True)
        )
        assert found.identical and not found.rows
        stored = {
            kg for st in open_checkpoint(chk[2]).operator("op").subtasks for kg in st.stored_key_groups(state)
        }
        native = any(st.native is not None for st in open_checkpoint(chk[2]).operator("op").subtasks)
        assert found.skipped == (0 if native else len(stored))


def test_keys_and_key_groups_narrow_the_diff(make_backend: BackendFactory, tmp_path: Path) -> None:
    chk = _program(tmp_path / "root", make_backend, 4, incremental=False)
    keys = ("ünï-😀", "", "alice", "nobody")
    for state in ("value", "list", "map", "nulls", "windows"):
        _check(chk[0], chk[2], state, DiffSettings(keys=keys, include_expired=True))
    groups = frozenset(assign_to_key_group(k, MAX_P, Types.STRING()) for k in KEYS[:4])
    for state in ("value", "map"):
        found = diff_state(open_side(chk[0]), open_side(chk[2]), "op", state, DiffSettings(key_groups=groups))
        rows = [r for t in found.rows for r in t.to_pylist()]
        assert {r["key_group"] for r in rows} <= groups
        every = diff_state(open_side(chk[0]), open_side(chk[2]), "op", state, DiffSettings())
        assert sorted(map(repr, rows)) == sorted(
            repr(r) for t in every.rows for r in t.to_pylist() if r["key_group"] in groups
        )
    with pytest.raises(InvalidArgumentError, match=r"\[INVALID_OPTION\].*do not exist"):
        diff_state(
            open_side(chk[0]), open_side(chk[2]), "op", "value", DiffSettings(key_groups=frozenset({MAX_P}))
        )
    with pytest.raises(InvalidArgumentError, match="INVALID_OPTION"):
        diff_state(open_side(chk[0]), open_side(chk[2]), "op", "value", DiffSettings(keys=(1.5,)))


@pytest.mark.parametrize("max_p", [48, 31])
def test_a_rescaled_max_parallelism_diffs_by_key(
    make_backend: BackendFactory, tmp_path: Path, max_p: int
) -> None:
    """48 shares 16 residues with 32; 31 none (every key group compared at once): same answers."""
    chk = _program(tmp_path / "root", make_backend, 5, incremental=False)
    rescaled = str(tmp_path / "rescaled")
    rewrite_max_parallelism(open_checkpoint(chk[0]), rescaled, max_p)
    for state in STATES:
        # the rewrite drops what a full snapshot's TTL cleanup drops: compare what reads show
        same = diff_state(open_side(chk[0]), open_side(rescaled), "op", state, DiffSettings())
        assert same.identical, state
        _check(rescaled, chk[1], state, DiffSettings(include_expired=True))
        _check(chk[0], rescaled, state, DiffSettings(include_expired=True))
    with pytest.raises(SnapshotDiffError, match=r"\[DIFF_INCOMPARABLE\].*max parallelism 48|31"):
        diff_state(
            open_side(rescaled), open_side(chk[1]), "op", "value", DiffSettings(key_groups=frozenset({1}))
        )


def test_states_that_do_not_compare_are_refused(tmp_path: Path) -> None:
    def one(root: Path, value: Any) -> str:
        live = HeapKeyedStateBackend(key_type=Types.STRING(), max_parallelism=MAX_P)
        live.set_current_key("k")
        if isinstance(value, dict):
            live.get_map_state(MapStateDescriptor("s", Types.STRING(), Types.LONG())).put_all(value)
        else:
            live.get_state(
                ValueStateDescriptor("s", Types.LONG() if isinstance(value, int) else Types.STRING())
            ).update(value)
        return checkpoint_now(CheckpointStorage(str(root)), live).directory.url

    longs, texts = one(tmp_path / "a", 1), one(tmp_path / "b", "1")
    with pytest.raises(SnapshotDiffError, match=r"\[DIFF_INCOMPARABLE\] state 's' of operator 'op'"):
        diff_state(open_side(longs), open_side(texts), "op", "s", DiffSettings())
    maps = one(tmp_path / "c", {"x": 1})
    with pytest.raises(SnapshotDiffError, match="DIFF_INCOMPARABLE"):
        diff_state(open_side(longs), open_side(maps), "op", "s", DiffSettings())


def test_namedtuple_keys_and_namespaces(tmp_path: Path) -> None:
    """ROW keys given as namedtuples (and as JSON arrays to select them), float fields, nulls."""
    point = namedtuple("point", ["region", "x"])
    desc = ValueStateDescriptor("v", Types.STRING())
    storage = CheckpointStorage(str(tmp_path / "rows"))
    live = HeapKeyedStateBackend(max_parallelism=MAX_P)
    keys = [point(r, x) for r in ("eu", "ünï", "") for x in (0.5, -0.0, 2.0)]
    paths = []
    for round_ in range(2):
        for i, key in enumerate(keys):
            live.set_current_key(key)
            if (i + round_) % 4:
                live.get_partitioned_state(i % 2, desc).update(f"{key.region}/{(i * round_) % 3}")
            else:
                live.get_partitioned_state(i % 2, desc).clear()
        paths.append(checkpoint_now(storage, live).directory.url)
    for settings in (DiffSettings(), DiffSettings(keys=(["ünï", 0.5], ["eu", -0.0], ["nowhere", 1.0]))):
        assert not _check(paths[0], paths[1], "v", settings).identical
