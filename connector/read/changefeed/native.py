"""Change-feed planning for native RocksDB checkpoints (``rocksdb_format="native"``).

A checkpoint held as RocksDB files records no changes, so a state's changes at
checkpoint ``k`` are the difference between its entries at ``k`` and at the checkpoint
before (per key group and scope, as for a state held in full in every checkpoint, see
:mod:`.diff`), each side read as a restore reads it: native subtasks decoded from their
files, Parquet ones from theirs. One partition per subtask of ``k``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from flinkstate.checkpoint import CompletedCheckpoint, Manifest, OperatorEntry, Storage

from ...errors import ChangeFeedError
from .diff import diff_refusal, read_after


def is_native(op: OperatorEntry | None) -> bool:
    return op is not None and any(st.native is not None for st in op.subtasks)


@dataclass(frozen=True)
class StatePlan:
    """One subtask's changes at ``checkpoint_id``: its key groups' entries against those of
    the checkpoint before (``before_operator``: the operator there, if it had one)."""

    checkpoint_id: int
    directory: str
    operator: OperatorEntry
    before_id: int
    before_directory: str
    before_operator: OperatorEntry | None
    key_groups: tuple[int, ...]

    def partition(self, wanted: set[int] | None) -> StateDiffPartition | None:
        groups = tuple(kg for kg in self.key_groups if wanted is None or kg in wanted)
        if not groups:
            return None
        return StateDiffPartition(self.checkpoint_id, self.directory, self.operator, self.before_id,
                                  self.before_directory, self.before_operator, groups)  # fmt: skip

    def read(
        self, state: str, storage: Mapping[str, Any], allow_pickle: bool
    ) -> Iterator[tuple[int, list[pa.Table], list[pa.Table]]]:
        """(key group, its tables before, its tables at the checkpoint) of every key group."""
        wanted = set(self.key_groups)

        def side(checkpoint_id: int, directory: str, op: OperatorEntry | None) -> dict[int, list[pa.Table]]:
            if op is None or op.keyed_state(state) is None:
                return {}
            manifest = Manifest(checkpoint_id, operators=(op,))
            checkpoint = CompletedCheckpoint(Storage(directory, storage), manifest, allow_pickle)
            return dict(checkpoint.read_keyed(op.uid, state, wanted))

        new = side(self.checkpoint_id, self.directory, self.operator)
        old = side(self.before_id, self.before_directory, self.before_operator)
        for kg in sorted(new.keys() | old.keys()):
            yield kg, old.get(kg, []), new.get(kg, [])


@dataclass(frozen=True)
class StateDiffPartition(StatePlan, InputPartition):
    """A :class:`StatePlan` limited to the wanted key groups."""


def state_plans(
    checkpoint: CompletedCheckpoint, before: CompletedCheckpoint | None, uid: str, state: str
) -> list[StatePlan]:
    """Per subtask of ``checkpoint``, what to compare; refused as :func:`.diff.diff_plans` is."""
    k = checkpoint.checkpoint_id
    why = diff_refusal(checkpoint, before, uid, state)
    if why is not None:
        raise ChangeFeedError(
            f"operator {uid!r} is checkpointed natively (its RocksDB files), so the changes of state "
            f"{state!r} at checkpoint {k} are the difference from the checkpoint before, and {why}: "
            f"{read_after(k)}"
        )
    assert before is not None
    op, old_op = checkpoint.operator(uid), before.manifest.operator(uid)
    plans = []
    for st in op.subtasks:
        assert st.key_group_range is not None
        groups = tuple(range(st.key_group_range[0], st.key_group_range[1] + 1))
        plans.append(StatePlan(k, checkpoint.directory.url, op, before.checkpoint_id, before.directory.url,
                               old_op, groups))  # fmt: skip
    return plans
