"""The change feed (``readChangeFeed=true``): the changes incremental checkpoints recorded.

Checkpoint ``k``'s changes of a state are the delta files it wrote (origin ``k``): in
the chain of a subtask, or beside a full file where ``k`` compacted the chain. Each row
is one change with the state's usual columns, ``checkpoint_id`` and ``change_type``:
``update`` (the new value; a list or map that changed is written whole, after a
``delete`` of its key in the same checkpoint) or ``delete``. A range needs every
checkpoint in it to be retained and to have recorded its changes; otherwise it is
refused with ``[CHANGE_FEED_UNAVAILABLE]`` naming the checkpoints it would need.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.checkpoint.format import read_row_groups
from flinkstate.checkpoint.keys import key_mask
from flinkstate.checkpoint.manifest import FileRef, OperatorEntry
from flinkstate.checkpoint.merge import DELETE
from flinkstate.checkpoint.storage import Storage
from flinkstate.checkpoint.verified import open_verified
from flinkstate.checkpoint.views import keyed_view, keyed_view_schema

from .options import OptionError, ReadOptions
from .reader import FlinkStateReader

FEED_FIELDS = [pa.field("checkpoint_id", pa.int64()), pa.field("change_type", pa.string())]
_SCOPE = ("key_group", "key", "namespace")


class ChangeFeedError(OptionError):
    """The asked range of changes cannot be answered exactly."""

    default_code = "CHANGE_FEED_UNAVAILABLE"


@dataclass(frozen=True)
class ChangePartition(InputPartition):
    """Row groups of one checkpoint's delta files: ((file, ((key group, row group), ...)), ...)."""

    checkpoint_id: int
    directory: str
    files: tuple[tuple[FileRef, tuple[tuple[int, int], ...]], ...]


def change_feed_schema(op: OperatorEntry, state: str, flatten: bool) -> pa.Schema:
    meta = op.keyed_state(state)
    if meta is None:
        raise OptionError(f"option readChangeFeed: {state!r} is not a keyed state of operator {op.uid!r}")
    view = keyed_view_schema(meta, op.key_type, flatten)
    return pa.schema([*view, *FEED_FIELDS])


def open_range(options: ReadOptions) -> list[CompletedCheckpoint]:
    """The completed checkpoints of the asked range, every one of them retained."""
    root = CheckpointStorage(options.path, options.storage)
    done = root.completed_ids()
    start = options.change_start
    assert start is not None
    end = options.change_end if options.change_end is not None else (done[-1] if done else start)
    if not done or start < done[0] or end > done[-1] or start > end:
        held = f"{done[0]}..{done[-1]}" if done else "none"
        raise ChangeFeedError(
            f"the changes of checkpoints {start}..{end} are needed; the retained checkpoints are {held}"
        )
    return [root.load(i, options.allow_pickle) for i in done if start <= i <= end]


def _delta_files(checkpoint: CompletedCheckpoint, uid: str, state: str) -> list[list[FileRef]]:
    """Per subtask, the delta files checkpoint ``k`` wrote for ``state``."""
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
                f"its changes (a first checkpoint, a restore, a rescale or an older writer): read the "
                f"changes of the checkpoints after {k}"
            )
        out.append(mine)
    return out


class ChangeFeedReader(FlinkStateReader):
    """Reads the changes of a range of checkpoints, with the usual key selection and pushdown."""

    def __init__(
        self, options: ReadOptions, checkpoints: list[CompletedCheckpoint], schema: pa.Schema
    ) -> None:
        super().__init__(options, checkpoints[-1], schema)
        if self.meta is None or self.op is None:
            raise OptionError(f"option readChangeFeed: {options.state!r} is not a keyed state")
        self.ranges = [(c.checkpoint_id, c.directory.url, _delta_files(c, self.op.uid, self.meta.name))
                       for c in checkpoints]  # fmt: skip

    def partitions(self) -> Sequence[InputPartition]:
        wanted = self._wanted_key_groups()
        out: list[InputPartition] = []
        for checkpoint_id, directory, subtasks in self.ranges:
            for refs in subtasks:
                picked = (
                    (r, tuple((kg, rg) for kg, (rg, _) in sorted(r.key_groups.items())
                              if wanted is None or kg in wanted))
                    for r in refs
                )  # fmt: skip
                files = tuple(f for f in picked if f[1])
                if files:
                    out.append(ChangePartition(checkpoint_id, directory, files))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ChangePartition)
        return self.read_changes(Storage(partition.directory, self.options.storage), partition)

    def read_changes(self, storage: Storage, partition: ChangePartition) -> Iterator[pa.RecordBatch]:
        op, meta = self.op, self.meta
        assert op is not None and meta is not None and op.key_type is not None
        keys = self._wanted_keys()
        for ref, groups in partition.files:
            with CompletedCheckpoint(storage, self.manifest).naming_corruption():
                pf = open_verified(storage, ref, whole=len(groups) == len(ref.key_groups))
                tables = read_row_groups(pf, [rg for _, rg in groups], ref.path)
            for table in tables:
                if keys is not None:
                    table = table.filter(key_mask(table.column("key"), keys, op.key_type))
                ops = (
                    table.column("op") if "op" in table.column_names else pa.nulls(table.num_rows, pa.int8())
                )
                deleted = pc.fill_null(pc.equal(ops, pa.scalar(DELETE, pa.int8())), False)
                parts = [self._deletes(table.filter(deleted), partition.checkpoint_id)]
                upserts = keyed_view(table.filter(pc.invert(deleted)), meta, self.options.flatten, None)
                parts.append(self._stamped(upserts, partition.checkpoint_id, "update"))
                out = pa.concat_tables([p for p in parts if p.num_rows] or parts[:1])
                if out.num_rows:
                    yield from out.to_batches()

    def _stamped(self, view: pa.Table, checkpoint_id: int, change: str) -> pa.Table:
        n = view.num_rows
        view = view.append_column("checkpoint_id", pa.repeat(pa.scalar(checkpoint_id, pa.int64()), n))
        return self._cast(view.append_column("change_type", pa.repeat(pa.scalar(change), n)))

    def _deletes(self, table: pa.Table, checkpoint_id: int) -> pa.Table:
        """Delete rows: the scope's columns, nulls for the rest."""
        n = table.num_rows
        columns: dict[str, Any] = {
            "checkpoint_id": pa.repeat(pa.scalar(checkpoint_id, pa.int64()), n),
            "change_type": pa.repeat(pa.scalar("delete"), n),
        }
        for name in _SCOPE:
            if name in table.column_names:
                columns[name] = table.column(name)
        fields = self.arrow_schema
        arrays = [columns[f.name].cast(f.type) if f.name in columns else pa.nulls(n, f.type) for f in fields]
        return pa.Table.from_arrays(arrays, schema=fields)
