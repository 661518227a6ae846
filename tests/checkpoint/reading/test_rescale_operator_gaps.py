"""Operator state of an operator where a subtask wrote none: repartitioned by subtask index
over the operator's parallelism (the missing subtask is an empty one), as Flink does."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, open_checkpoint
from flinkstate.checkpoint.manifest import OperatorStateInfo, SubtaskEntry
from flinkstate.checkpoint.writing.rewrite import rewrite_max_parallelism
from flinkstate.connector.write.batch import operator_entry
from flinkstate.connector.write.stream import _append
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    OperatorStateBackend,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index as key_groups_of
from flinkstate.state.operator import OperatorStateMode

OFFSETS = ListStateDescriptor("offsets", Types.LONG())
#: Flink's RoundRobinOperatorStateRepartitioner: unchanged parallelism keeps each subtask's
#: own state; else all elements, in subtask order, cut into runs.
EXPECTED = {3: [[1, 2, 3], [], [5]], 2: [[1, 2], [3, 5]], 4: [[1], [2], [3], [5]]}


def _gap_checkpoint(path: Path) -> CompletedCheckpoint:
    """Operator ``op`` at parallelism 3: subtask 0 holds 1, 2, 3 and subtask 2 holds 5 (list
    and raw operator state); subtask 1 wrote nothing."""
    pending = CheckpointStorage(str(path)).begin()
    for index, elements in ((0, [1, 2, 3]), (2, [5])):
        backend = OperatorStateBackend()
        state = backend.get_list_state(OFFSETS)
        for e in elements:
            state.add(e)
        raw = [bytes([e]) for e in elements]
        pending.write_subtask("op", index, 3, 128, operator=backend, raw_operator=raw).result()
    return pending.commit()


def _lists(ck: CompletedCheckpoint, parallelism: int) -> list[list[int]]:
    return [
        list(ck.operator_backend("op", i, parallelism).get_list_state(OFFSETS).get())
        for i in range(parallelism)
    ]


@pytest.mark.parametrize("parallelism", sorted(EXPECTED))
def test_list_state_repartitioned_by_subtask_index(tmp_path: Path, parallelism: int) -> None:
    ck = _gap_checkpoint(tmp_path / "ck")
    assert _lists(ck, parallelism) == EXPECTED[parallelism]
    assert _lists(open_checkpoint(str(tmp_path / "ck")), parallelism) == EXPECTED[parallelism]


@pytest.mark.parametrize("parallelism", sorted(EXPECTED))
def test_raw_operator_state_repartitioned_by_subtask_index(tmp_path: Path, parallelism: int) -> None:
    ck = _gap_checkpoint(tmp_path / "ck")
    got = [[b[0] for b in ck.raw_operator("op", i, parallelism)] for i in range(parallelism)]
    assert got == EXPECTED[parallelism]


def test_rewrite_keeps_the_missing_subtask_empty(tmp_path: Path) -> None:
    ck = _gap_checkpoint(tmp_path / "ck")
    rewritten = rewrite_max_parallelism(ck, str(tmp_path / "rewritten"), 256)
    for parallelism, expected in EXPECTED.items():
        assert _lists(rewritten, parallelism) == expected


def test_spark_write_keeps_other_states_at_their_subtask_index(tmp_path: Path) -> None:
    """Writing another state into the operator keeps each subtask's own files in place."""
    base = _gap_checkpoint(tmp_path / "ck").manifest.operators[0]
    info = OperatorStateInfo("other", OperatorStateMode.SPLIT_DISTRIBUTE, Types.LONG())
    options = SimpleNamespace(parallelism=3, max_parallelism=128, operator="op", state="other")
    plan = SimpleNamespace(options=options, keyed=False, key_type=None, operator_info=lambda: info)
    entry = operator_entry(cast(Any, plan), [], base)
    held = {s.index: dict(s.operator) for s in base.subtasks}
    assert [dict(s.operator) for s in entry.subtasks] == [held[0], {}, held[2]]


def test_streaming_append_keeps_earlier_files_at_their_subtask_index(tmp_path: Path) -> None:
    pending = CheckpointStorage(str(tmp_path / "ck")).begin()
    for index in (0, 2):
        backend = HeapKeyedStateBackend(
            key_type=Types.LONG(), key_group_range=key_groups_of(128, 3, index), max_parallelism=128
        )
        key = next(
            k for k in range(1000) if assign_to_key_group(k, 128, Types.LONG()) in backend.key_group_range
        )
        backend.set_current_key(key)
        backend.get_state(ValueStateDescriptor("v", Types.LONG())).update(index)
        pending.write_keyed("op", backend, subtask=index, parallelism=3).result()
    old = pending.commit().manifest.operators[0]
    dense = replace(old, subtasks=tuple(SubtaskEntry(i) for i in range(3)))
    appended = _append(dense, old, [], "v")
    held = {s.index: s.keyed["v"] for s in old.subtasks}
    assert [s.keyed.get("v") for s in appended.subtasks] == [held[0], None, held[2]]
