"""Where a keyed state's weight lies: rows and bytes per key group, and per subtask at any parallelism.

Rows come from the manifest's key-group index (stored rows: one per key and namespace, one
per map entry, delete rows included); bytes are the compressed size of each key group's row
group, taken from the data files' Parquet footers (read exactly and checked against the
manifest), so no data page is read. This is what decides how evenly a restore at a given
parallelism spreads the state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flinkstate.state.keygroups.assignment import KeyGroupRange, compute_key_group_range_for_operator_index

from .errors import CheckpointCorruptError
from .restore import CompletedCheckpoint
from .verified import open_ranges


@dataclass(frozen=True)
class Load:
    """Stored rows and bytes."""

    rows: int = 0
    bytes: int = 0

    def __add__(self, other: Load) -> Load:
        return Load(self.rows + other.rows, self.bytes + other.bytes)


def key_group_loads(
    checkpoint: CompletedCheckpoint, uid: str, states: Sequence[str] | None = None
) -> dict[int, Load]:
    """Rows and bytes of every key group (``0 .. max parallelism - 1``) of operator ``uid``,
    summed over ``states`` (default: every keyed state of the operator)."""
    op = checkpoint.operator(uid)
    names = [s.name for s in op.keyed_states] if states is None else list(states)
    for name in names:
        checkpoint.state_meta(uid, name)  # an unknown state is an error that lists the known ones
    loads = dict.fromkeys(range(op.max_parallelism), Load())
    for subtask in op.subtasks:
        for name in names:
            for ref in subtask.keyed.get(name, ()):
                if not ref.key_groups:
                    continue
                metadata = open_ranges(checkpoint.directory, ref).metadata
                for kg, (index, rows) in ref.key_groups.items():
                    if index >= metadata.num_row_groups or metadata.row_group(index).num_rows != rows:
                        raise CheckpointCorruptError(
                            f"data file {ref.path}: row group {index} (key group {kg}) does not hold the "
                            f"{rows} rows the manifest says"
                        )
                    group = metadata.row_group(index)
                    size = sum(group.column(c).total_compressed_size for c in range(group.num_columns))
                    loads[kg] = loads.get(kg, Load()) + Load(rows, size)
    return loads


def subtask_loads(
    loads: Mapping[int, Load], max_parallelism: int, parallelism: int
) -> list[tuple[KeyGroupRange, Load]]:
    """The key-group range and load of each subtask when restored at ``parallelism``."""
    out = []
    for index in range(parallelism):
        rng = compute_key_group_range_for_operator_index(max_parallelism, parallelism, index)
        total = Load()
        for kg in rng:
            total += loads.get(kg, Load())
        out.append((rng, total))
    return out
