"""Offline rewrite of a savepoint to another max parallelism: every key is reassigned.

Max parallelism fixes the key groups, so a restore keeps it; changing it means reading
every key, computing its new group and writing a new savepoint (with the source's
event-time watermark, so what was expired stays expired).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flinkstate.state.heap.backend import HeapKeyedStateBackend
from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.keygroups.assignment import (
    check_max_parallelism,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)
from flinkstate.state.keygroups.hashing import key_group_assigner
from flinkstate.state.operator import OperatorStateBackend, OperatorStateData, OperatorStateMode, repartition

from ..errors import StateMigrationError
from ..manifest import WATERMARK_PROPERTY
from ..reading.merge import merge_keyed
from ..reading.restore import CompletedCheckpoint
from .checkpoints import begin_savepoint


def _select(cols: StateColumns, rows: list[int]) -> StateColumns:
    def pick(values: list[Any] | None) -> list[Any] | None:
        return None if values is None else [values[i] for i in rows]

    return StateColumns([cols.keys[i] for i in rows], pick(cols.namespaces), [cols.values[i] for i in rows],
                        pick(cols.timestamps))  # fmt: skip


def _redistribute(old: list[list[OperatorStateData]], p: int) -> list[list[OperatorStateData]]:
    """Operator states for ``p`` subtasks that restore to exactly what was written.

    Split states are split and broadcast states copied as on a restore; but a restore
    hands every subtask the union of all subtasks' union states, so writing that back per
    subtask would multiply it: union elements are kept once (old subtask ``j``'s go to
    new subtask ``j % p``).
    """
    if p == len(old):
        return old
    new = repartition(old, p)
    for i, states in enumerate(new):
        for n, data in enumerate(states):
            if data.mode is OperatorStateMode.UNION:
                own = [
                    e
                    for j, subtask in enumerate(old)
                    if j % p == i
                    for d in subtask
                    if d.mode is OperatorStateMode.UNION and d.name == data.name
                    for e in d.elements
                ]
                states[n] = data.copy(own)
    return new


def rewrite_max_parallelism(
    source: CompletedCheckpoint,
    target_url: str,
    max_parallelism: int,
    storage_options: Mapping[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CompletedCheckpoint:
    """A new savepoint at ``target_url`` holding ``source`` with ``max_parallelism``.

    Each operator keeps its parallelism (capped at the new max parallelism). Raw keyed
    state cannot be rewritten (its keys are unknown) and is an error. ``progress(done,
    total)`` is called as keyed state is read, in stored rows (as the manifest counts them).
    """
    check_max_parallelism(max_parallelism)
    total = sum(r.rows for op in source.manifest.operators for st in op.subtasks
                for refs in st.keyed.values() for r in refs)  # fmt: skip
    done = 0
    pending = begin_savepoint(target_url, storage_options)
    try:
        for op in source.manifest.operators:
            if any(st.raw_keyed is not None for st in op.subtasks):
                raise StateMigrationError(
                    f"operator {op.uid!r} has raw keyed state, whose keys are unknown: it cannot be "
                    "moved to another max parallelism"
                )
            p = min(op.parallelism, max_parallelism)
            backends = [
                HeapKeyedStateBackend(
                    key_type=op.key_type,
                    max_parallelism=max_parallelism,
                    key_group_range=compute_key_group_range_for_operator_index(max_parallelism, p, i),
                )
                for i in range(p)
            ]
            watermark = source.manifest.watermark(op.uid)
            if watermark is not None:  # event-time TTL goes on from where the source was
                for backend in backends:
                    backend.advance_watermark(watermark)
            for meta in op.keyed_states:
                for backend in backends:
                    backend.restore_state(meta, backend.key_group_range.start, StateColumns([], None, []))
                if op.key_type is None:
                    continue
                assign = key_group_assigner(op.key_type)
                for _, tables in source.read_keyed(op.uid, meta.name):
                    done += sum(t.num_rows for t in tables)
                    if progress is not None:
                        progress(done, total)
                    cols = merge_keyed(tables, meta, op.key_type, source.allow_pickle)
                    groups: dict[int, list[int]] = {}
                    for row, key in enumerate(cols.keys):
                        groups.setdefault(assign(key, max_parallelism), []).append(row)
                    for kg, rows in groups.items():
                        index = compute_operator_index_for_key_group(max_parallelism, p, kg)
                        backends[index].restore_state(meta, kg, _select(cols, rows))
            operator_states = _redistribute(source.operator_states(op.uid), p)
            raw_operator = [source.raw_operator(op.uid, i, p) for i in range(p)]
            for i, backend in enumerate(backends):
                pending.write_subtask(
                    op.uid, i, p, max_parallelism, keyed=backend,
                    operator=OperatorStateBackend(operator_states[i]), raw_operator=raw_operator[i] or None,
                )  # fmt: skip
    except BaseException:
        pending.abort()
        raise
    properties = {"rewritten_from_checkpoint": str(source.checkpoint_id)}
    if WATERMARK_PROPERTY in source.manifest.properties:
        properties[WATERMARK_PROPERTY] = source.manifest.properties[WATERMARK_PROPERTY]
    return pending.commit(properties)
