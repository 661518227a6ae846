"""Where a keyed state's weight lies: live entries and stored bytes per key group, and per
subtask at any parallelism.

Entries are what a restore holds (one per key and namespace, one per map entry): a key
group's files are read and merged as a restore merges them (``merge.count_keyed``), so an
incremental checkpoint's delta and delete rows are resolved, not counted (an entry updated
in three increments counts once, a deleted one not at all). Bytes are stored bytes: the
compressed size of each key group's row groups in every file that holds it, increments
included, taken from the data files' Parquet footers (checked against the manifest).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flinkstate.state.keygroups.assignment import KeyGroupRange, compute_key_group_range_for_operator_index

from ..errors import CheckpointCorruptError
from ..reading.keyed_files import naming_corruption
from ..reading.merge import count_keyed
from ..reading.restore import CompletedCheckpoint
from ..reading.verified import open_ranges


@dataclass(frozen=True)
class Load:
    """Live entries and stored bytes."""

    entries: int = 0
    bytes: int = 0

    def __add__(self, other: Load) -> Load:
        return Load(self.entries + other.entries, self.bytes + other.bytes)


def key_group_loads(
    checkpoint: CompletedCheckpoint, uid: str, states: Sequence[str] | None = None
) -> dict[int, Load]:
    """Entries and stored bytes of every key group (``0 .. max parallelism - 1``) of operator
    ``uid``, summed over ``states`` (default: every keyed state of the operator)."""
    op = checkpoint.operator(uid)
    names = [s.name for s in op.keyed_states] if states is None else list(states)
    loads = dict.fromkeys(range(op.max_parallelism), Load())
    for name in names:
        for kg, entries in state_entries(checkpoint, uid, name).items():
            loads[kg] += Load(entries=entries)
        for kg, size in _stored_bytes(checkpoint, uid, name).items():
            loads[kg] += Load(bytes=size)
    return loads


def state_entries(checkpoint: CompletedCheckpoint, uid: str, state: str) -> dict[int, int]:
    """The live entries of keyed state ``state`` per key group holding any (resolved as a
    restore resolves them)."""
    meta = checkpoint.state_meta(uid, state)  # an unknown state is an error
    key_type = checkpoint.operator(uid).key_type
    out: dict[int, int] = {}
    for kg, tables in checkpoint.read_keyed(uid, state):
        assert key_type is not None  # a keyed state's operator has a key type
        with naming_corruption(checkpoint.checkpoint_id, checkpoint.directory):
            count = count_keyed(tables, meta, key_type, checkpoint.allow_pickle)
        if count:
            out[kg] = count
    return out


def _stored_bytes(checkpoint: CompletedCheckpoint, uid: str, state: str) -> dict[int, int]:
    """Compressed bytes of ``state`` per key group, from the footers of the files holding it
    (of native SST files: each file's bytes spread evenly over the key groups it spans)."""
    out: dict[int, int] = {}
    for subtask in checkpoint.operator(uid).subtasks:
        for native in () if subtask.native is None else subtask.native.state_files(state):
            if native.key_groups is None:
                continue
            first, last = native.key_groups  # an SST file's bytes, spread evenly over its key groups
            for kg in range(first, last + 1):
                out[kg] = out.get(kg, 0) + native.ref.size // (last - first + 1)
        for ref in subtask.keyed.get(state, ()):
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
                out[kg] = out.get(kg, 0) + size
    return out


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
