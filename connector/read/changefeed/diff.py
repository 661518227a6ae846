"""Change-feed planning per checkpoint: which files hold a state's changes, or when none do.

A state whose TTL uses ``cleanup_full_snapshot`` is held in full in every checkpoint and
its expiry is never a recorded change, so its changes at checkpoint ``k`` are the
difference between the full files of ``k`` and of the checkpoint before (per key group
and scope, by :func:`flinkstate.checkpoint.scope_diff`: a scope gone is a ``delete``; a new or
changed one an ``update``, after a ``delete`` for a LIST or MAP). Every other state's changes
are the deltas ``k`` wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from flinkstate.checkpoint import (
    CompletedCheckpoint,
    FileRef,
    KeyGroupFiles,
    SubtaskEntry,
    key_group_files,
    only_key_groups,
    stored_key_group,
)
from flinkstate.state import StateMetaInfo, TypeInformation

from ...errors import ChangeFeedError


def read_after(k: int) -> str:
    return f"read the changes of the checkpoints after {k}"


def _range(st: SubtaskEntry) -> set[int] | None:
    rng = st.key_group_range
    return None if rng is None else set(range(rng[0], rng[1] + 1))


def _holds(before: CompletedCheckpoint, uid: str, state: str, groups: set[int] | None, max_p: int) -> bool:
    """Whether ``before`` has files of ``state`` that may hold entries of ``groups`` (of
    ``max_p`` key groups: any file when ``before`` has another number)."""
    op = before.manifest.operator(uid)
    refs = [] if op is None else [r for st in op.subtasks for r in st.keyed.get(state, ())]
    if op is not None and op.max_parallelism != max_p:
        groups = None
    return any(groups is None or not r.key_groups or r.key_groups.keys() & groups for r in refs)


def delta_files(
    checkpoint: CompletedCheckpoint, before: CompletedCheckpoint | None, uid: str, state: str
) -> list[list[FileRef]]:
    """Per subtask, the delta files checkpoint ``k`` wrote for ``state``. A subtask with no
    file of it is unchanged only if ``before`` (the checkpoint before ``k``) had none either:
    a state emptied in a checkpoint written in full leaves no trace in ``k`` itself."""
    k = checkpoint.checkpoint_id
    op = checkpoint.operator(uid)
    out = []
    for st in op.subtasks:
        chain = st.keyed.get(state, ())
        mine = [r for r in (*chain, *st.changes.get(state, ())) if r.checkpoint_id == k and r.delta]
        untracked = bool(chain) and all(r.checkpoint_id is None for r in chain)
        full = [r for r in chain if r.checkpoint_id == k and not r.delta]
        if untracked or (full and not mine):
            raise ChangeFeedError(
                f"checkpoint {k} wrote state {state!r} of subtask {st.index} in full without recording "
                f"its changes (a first checkpoint, a restore, a rescale or an older writer): {read_after(k)}"
            )
        if not chain and not mine:
            if before is None:
                raise ChangeFeedError(
                    f"checkpoint {k} holds no file of state {state!r} for subtask {st.index}; whether it "
                    f"was emptied needs the checkpoint before {k}, which is not retained: {read_after(k)}"
                )
            if _holds(before, uid, state, _range(st), op.max_parallelism):
                raise ChangeFeedError(
                    f"checkpoint {k} holds no file of state {state!r} for subtask {st.index} while "
                    f"checkpoint {before.checkpoint_id} holds some: it was written in full without "
                    f"recording its changes (a full checkpoint, a restore or a rescale): {read_after(k)}"
                )
        out.append(mine)
    return out


@dataclass(frozen=True)
class DiffPlan:
    """One subtask's changes at ``checkpoint_id``: its files against the checkpoint before's."""

    checkpoint_id: int
    directory: str
    before_id: int
    before_directory: str
    new: KeyGroupFiles
    old: KeyGroupFiles

    def partition(self, wanted: set[int] | None) -> DiffPartition | None:
        new = self.new if wanted is None else only_key_groups(self.new, wanted)
        old = self.old if wanted is None else only_key_groups(self.old, wanted)
        if not new and not old:
            return None
        return DiffPartition(
            self.checkpoint_id, self.directory, self.before_id, self.before_directory, new, old
        )


@dataclass(frozen=True)
class DiffPartition(DiffPlan, InputPartition):
    """A :class:`DiffPlan` limited to the wanted key groups."""


def diff_plans(
    checkpoint: CompletedCheckpoint, before: CompletedCheckpoint | None, uid: str, state: str
) -> list[DiffPlan]:
    """Per subtask of ``checkpoint``, what to compare for a state held in full in every
    checkpoint; refused when the checkpoint before is not retained or not comparable."""
    k = checkpoint.checkpoint_id
    op = checkpoint.operator(uid)
    why = diff_refusal(checkpoint, before, uid, state)
    if why is not None:
        raise ChangeFeedError(
            f"state {state!r} is held in full in every checkpoint (TTL cleanup_full_snapshot), so its "
            f"changes at checkpoint {k} are the difference from the checkpoint before, and {why}: "
            f"{read_after(k)}"
        )
    assert before is not None
    old_op = before.manifest.operator(uid)
    old_refs = [] if old_op is None else [r for st in old_op.subtasks for r in st.keyed.get(state, ())]
    plans = []
    for st in op.subtasks:
        groups = _range(st)
        assert groups is not None
        new = key_group_files(st.keyed.get(state, ()), groups)
        plans.append(DiffPlan(k, checkpoint.directory.url, before.checkpoint_id, before.directory.url,
                              new, key_group_files(old_refs, groups)))  # fmt: skip
    return plans


def diff_refusal(
    checkpoint: CompletedCheckpoint, before: CompletedCheckpoint | None, uid: str, state: str
) -> str | None:
    """Why ``state``'s changes at ``checkpoint`` cannot be the difference from ``before``
    (the checkpoint before it, if retained); ``None`` when they can."""
    k = checkpoint.checkpoint_id
    op = checkpoint.operator(uid)
    why = None
    if before is None:
        why = f"the checkpoint before {k} is not retained"
    else:
        old_op = before.manifest.operator(uid)
        comparable = old_op is None or (
            (old_op.max_parallelism, old_op.key_type) == (op.max_parallelism, op.key_type)
            and old_op.keyed_state(state) in (None, op.keyed_state(state))
        )
        if not comparable and _holds(before, uid, state, None, op.max_parallelism):
            why = f"checkpoint {before.checkpoint_id} holds it with another description or key groups"
        elif any(st.key_group_range is None for st in op.subtasks):
            why = f"checkpoint {k} does not record its subtasks' key groups"
    return why


def stored_rows(
    tables: list[pa.Table] | None, meta: StateMetaInfo, key_type: TypeInformation, kg: int, allow_pickle: bool
) -> pa.Table | None:
    """One key group's rows as one table in the stored layout (several files merged)."""
    if not tables:
        return None
    return stored_key_group(tables, meta, key_type, kg, allow_pickle)
