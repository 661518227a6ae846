"""Live entries of an incremental chain (``checkpoint.stats``, ``flinkstate inspect``/``skew``)
against a model: what a full restore of the same checkpoint holds.

An entry updated in several increments counts once, a deleted one not at all; stored rows
(delta and delete rows included) are what the files hold.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from checkpoint_data import dump
from incremental_ops import Workload, checkpoint_now
from typer.testing import CliRunner

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.checkpoint.views.stats import key_group_loads, state_entries
from flinkstate.cli import app
from flinkstate.state import (
    HeapKeyedStateBackend,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.descriptors import StateKind
from flinkstate.state.ttl.time import ManualTimeProvider

MAX_P = 32
P = 2


def _chain(root: Path, seed: int, checkpoints: int = 6) -> CompletedCheckpoint:
    """An incremental chain of two subtasks running random updates and deletes; its last checkpoint."""
    clock = ManualTimeProvider(1_000)
    storage = CheckpointStorage(str(root), retain=checkpoints + 1, incremental=True)
    jobs = []
    for i in range(P):
        rng = compute_key_group_range_for_operator_index(MAX_P, P, i)
        keys = [k for k in range(4_000) if assign_to_key_group(k, MAX_P) in rng][:30]
        backend = HeapKeyedStateBackend(max_parallelism=MAX_P, key_group_range=rng, time_provider=clock)
        jobs.append((backend, Workload(seed * 10 + i, keys, clock)))
    for _ in range(checkpoints):
        pending = storage.begin()
        for i, (backend, work) in enumerate(jobs):
            work.run(backend, 200)
            pending.write_keyed("op", backend, subtask=i, parallelism=P)
        last = pending.commit()
    return last


def _restored(checkpoint: CompletedCheckpoint) -> dict[str, Counter[int]]:
    """The model: entries per state and key group of a full restore (MAP: one per map entry),
    TTL-blind as a restore is (the clock at 0: the snapshot read back drops nothing expired)."""
    out: dict[str, Counter[int]] = {m.name: Counter() for m in checkpoint.operator("op").keyed_states}
    for i in range(P):
        backend = checkpoint.keyed_backend("op", i, P, time_provider=ManualTimeProvider(0))
        for (state, key, _), value in dump(backend, timestamps=False).items():
            maps = checkpoint.state_meta("op", state).kind is StateKind.MAP
            out[state][assign_to_key_group(key, MAX_P)] += len(value) if maps else 1
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_entries_of_an_incremental_chain_are_those_of_a_full_restore(tmp_path: Path, seed: int) -> None:
    checkpoint = _chain(tmp_path / "chain", seed)
    want = _restored(checkpoint)
    refs = [r for st in checkpoint.operator("op").subtasks for fs in st.keyed.values() for r in fs]
    assert any(r.delta for r in refs)  # the chain holds increments ...
    stored = sum(r.rows for r in refs)
    assert stored > sum(sum(c.values()) for c in want.values())  # ... whose rows are not all entries
    for state, counts in want.items():
        assert state_entries(checkpoint, "op", state) == {kg: n for kg, n in counts.items() if n}, state
    loads = key_group_loads(checkpoint, "op")
    assert {kg: load.entries for kg, load in loads.items()} == {
        kg: sum(c[kg] for c in want.values()) for kg in range(MAX_P)
    }


def test_inspect_and_skew_print_live_entries(tmp_path: Path) -> None:
    root = tmp_path / "chain"
    checkpoint = _chain(root, 7)
    want = _restored(checkpoint)
    runner = CliRunner(env={"FLINKSTATE_DEBUG": ""})
    result = runner.invoke(app, ["inspect", str(root), "--json"])
    assert result.exit_code == 0, result.stdout
    op = json.loads(result.stdout)["operators"][0]
    assert {s["state"]: s["entries"] for s in op["states"]} == {s: sum(c.values()) for s, c in want.items()}
    assert any(s["stored_rows"] > s["entries"] for s in op["states"])
    for st in op["subtasks"]:
        rng = compute_key_group_range_for_operator_index(MAX_P, P, st["index"])
        assert st["entries"] == sum(c[kg] for c in want.values() for kg in rng)
    result = runner.invoke(app, ["skew", str(root), "op", "list", "--json"])
    assert result.exit_code == 0, result.stdout
    doc = json.loads(result.stdout)
    assert {g["key_group"]: g["entries"] for g in doc["key_groups"]} == {
        kg: want["list"][kg] for kg in range(MAX_P)
    }
    assert doc["entries"] == sum(want["list"].values())
    text = runner.invoke(app, ["inspect", str(root)]).stdout
    header = next(line for line in text.splitlines() if line.startswith("operator\tstate\t"))
    assert header.endswith("\tentries\tstored rows\tstored bytes")


def test_a_chain_of_pickled_values_is_counted_with_allow_pickle_only(tmp_path: Path) -> None:
    root = tmp_path / "pickled"
    storage = CheckpointStorage(str(root), retain=5, incremental=True)
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=MAX_P)
    desc = ValueStateDescriptor("p", Types.PICKLED_BYTE_ARRAY())
    for version, keys in enumerate((range(100), range(5), range(6))):  # small increments: no compaction
        for key in keys:
            backend.set_current_key(key)
            if version == 2 and key < 3:
                backend.get_state(desc).clear()
            else:
                backend.get_state(desc).update({"version": version, "key": key})
        checkpoint_now(storage, backend)
    runner = CliRunner(env={"FLINKSTATE_DEBUG": ""})
    first = runner.invoke(app, ["inspect", str(root), "-c", "1", "--json"])  # one file: counted in Arrow
    assert first.exit_code == 0 and json.loads(first.stdout)["operators"][0]["states"][0]["entries"] == 100
    for command in (["inspect", str(root)], ["skew", str(root), "op"]):
        refused = runner.invoke(app, [*command, "--json"])
        assert refused.exit_code == 3 and refused.stderr.startswith("[PICKLE_NOT_ALLOWED]")
        assert "--allow-pickle" in refused.stderr
        allowed = runner.invoke(app, [*command, "--json", "--allow-pickle"])
        assert allowed.exit_code == 0, allowed.stderr
        doc = json.loads(allowed.stdout)
        entries = doc["operators"][0]["states"][0]["entries"] if command[0] == "inspect" else doc["entries"]
        assert entries == 97
