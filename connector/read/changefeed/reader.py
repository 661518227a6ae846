"""The change feed (``readChangeFeed=true``): the changes incremental checkpoints recorded.

Checkpoint ``k``'s changes of a state are the delta files it wrote (origin ``k``): in
the chain of a subtask, or beside a full file where ``k`` compacted the chain. Each row
is one change with the state's usual columns, ``checkpoint_id`` and ``change_type``:
``update`` (the new value; a list or map that changed is written whole, after a
``delete`` of its key in the same checkpoint) or ``delete``. A range needs every
checkpoint in it to be retained and to have recorded its changes (a state held in full
in every checkpoint is compared with the checkpoint before, see :mod:`.diff`);
otherwise it is refused with ``[CHANGE_FEED_UNAVAILABLE]`` naming the checkpoints it needs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition

from flinkstate.checkpoint import (
    DELETE,
    CheckpointNotFoundError,
    CheckpointStorage,
    CompletedCheckpoint,
    FileRef,
    KeyGroupFiles,
    OperatorEntry,
    Storage,
    change_rows,
    change_schema,
    key_group_files,
    keyed_view,
    keyed_view_schema,
    only_key_groups,
    read_key_groups,
    rows_of_keys,
    scope_diff,
)

from ...errors import ChangeFeedError, OptionError
from ...options import ReadOptions
from ..checkpoint_reader import FlinkStateReader, is_stand_in
from .diff import (
    DiffPartition,
    DiffPlan,
    delta_files,
    diff_plans,
    stored_rows,
)
from .native import StateDiffPartition, StatePlan, is_native, state_plans
from .scope import deletes_then_updates, rewritten


@dataclass(frozen=True)
class ChangePartition(InputPartition):
    """Row groups of one checkpoint's delta files, and of its chain (the state at the
    checkpoint) for the same key groups: ((file, ((key group, row group), ...)), ...)."""

    checkpoint_id: int
    directory: str
    files: KeyGroupFiles
    chain: KeyGroupFiles = ()


def change_feed_schema(op: OperatorEntry, state: str, flatten: bool) -> pa.Schema:
    meta = op.keyed_state(state)
    if meta is None:
        raise OptionError(f"option readChangeFeed: {state!r} is not a keyed state of operator {op.uid!r}")
    return change_schema(keyed_view_schema(meta, op.key_type, flatten))


def change_feed_schema_of(options: ReadOptions, checkpoints: list[CompletedCheckpoint]) -> pa.Schema:
    """The feed's schema: the state's view in the range's last checkpoint, and the feed's columns."""
    last = checkpoints[-1]
    return change_feed_schema(last.operator(options.operator or ""), options.state or "", options.flatten)


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


def open_before(options: ReadOptions, first: int) -> CompletedCheckpoint | None:
    """The retained checkpoint just before ``first``, if any."""
    root = CheckpointStorage(options.path, options.storage)
    earlier = [i for i in root.completed_ids() if i < first]
    try:
        return root.load(earlier[-1], options.allow_pickle) if earlier else None
    except CheckpointNotFoundError:  # deleted by retention meanwhile
        return None


class ChangeFeedReader(FlinkStateReader):
    """Reads the changes of a range of checkpoints, with the usual key selection and pushdown."""

    def __init__(
        self, options: ReadOptions, checkpoints: list[CompletedCheckpoint], schema: pa.Schema
    ) -> None:
        super().__init__(options, checkpoints[-1], schema)
        if self.meta is None or self.op is None:
            raise OptionError(f"option readChangeFeed: {options.state!r} is not a keyed state")
        uid, name = self.op.uid, self.meta.name
        self.ranges: list[tuple[int, str, list[tuple[list[FileRef], tuple[FileRef, ...]]]]] = []
        self.diffs: list[DiffPlan | StatePlan] = []
        befores = [open_before(options, checkpoints[0].checkpoint_id), *checkpoints[:-1]]
        for before, checkpoint in zip(befores, checkpoints, strict=True):
            meta = checkpoint.operator(uid).keyed_state(name)
            if is_native(checkpoint.operator(uid)) or (before and is_native(before.manifest.operator(uid))):
                self.diffs += state_plans(checkpoint, before, uid, name)
            elif meta is not None and meta.full_in_every_checkpoint:
                self.diffs += diff_plans(checkpoint, before, uid, name)
            else:
                files = delta_files(checkpoint, before, uid, name)
                chains = [st.keyed.get(name, ()) for st in checkpoint.operator(uid).subtasks]
                self.ranges.append((checkpoint.checkpoint_id, checkpoint.directory.url,
                                    list(zip(files, chains, strict=True))))  # fmt: skip

    def partitions(self) -> Sequence[InputPartition]:
        wanted = self._wanted_key_groups()
        out: list[InputPartition] = []
        for checkpoint_id, directory, subtasks in self.ranges:
            for refs, chain in subtasks:
                files = key_group_files(refs, wanted)
                if files:
                    groups = {kg for _, pairs in files for kg, _ in pairs}
                    out.append(
                        ChangePartition(checkpoint_id, directory, files, key_group_files(chain, groups))
                    )
        out += [p for plan in self.diffs if (p := plan.partition(wanted)) is not None]
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, DiffPartition):
            return self.read_diff(partition)
        if isinstance(partition, StateDiffPartition):
            name, pickle = self.options.state or "", self.options.allow_pickle
            return self._diffs(partition.read(name, self.options.storage, pickle), partition.checkpoint_id)
        if is_stand_in(partition):
            return iter(())
        assert isinstance(partition, ChangePartition)
        return self.read_changes(Storage(partition.directory, self.options.storage), partition)

    def read_changes(self, storage: Storage, partition: ChangePartition) -> Iterator[pa.RecordBatch]:
        """The rows of delta files: ``op`` deletes, then upserts; a key group whose rows do
        not read so has the scopes they touch rewritten from the chain (:mod:`.scope`)."""
        op, meta = self.op, self.meta
        assert op is not None and meta is not None and op.key_type is not None
        k = partition.checkpoint_id
        deltas = dict(read_key_groups(storage, partition.files, k))
        other = {kg for kg, tables in deltas.items() if not deletes_then_updates(tables, meta)}
        chain = dict(read_key_groups(storage, only_key_groups(partition.chain, other), k)) if other else {}
        for kg, tables in sorted(deltas.items()):
            if kg in other:
                now = stored_rows(chain.get(kg), meta, op.key_type, kg, self.options.allow_pickle)
                yield from self._changes(*rewritten(tables, now, meta), k)
                continue
            for table in tables:
                ops = (
                    table.column("op") if "op" in table.column_names else pa.nulls(table.num_rows, pa.int8())
                )
                deleted = pc.fill_null(pc.equal(ops, pa.scalar(DELETE, pa.int8())), False)
                yield from self._changes(table.filter(deleted), table.filter(pc.invert(deleted)),
                                         partition.checkpoint_id)  # fmt: skip

    def read_diff(self, partition: DiffPartition) -> Iterator[pa.RecordBatch]:
        """The difference of a subtask's key groups from the checkpoint before."""
        storage = self.options.storage
        new = dict(
            read_key_groups(Storage(partition.directory, storage), partition.new, partition.checkpoint_id)
        )
        old = dict(read_key_groups(Storage(partition.before_directory, storage), partition.old,
                                   partition.before_id))  # fmt: skip
        groups = ((kg, old.get(kg), new.get(kg)) for kg in sorted(new.keys() | old.keys()))
        return self._diffs(groups, partition.checkpoint_id)

    def _diffs(
        self, groups: Iterator[tuple[int, list[pa.Table] | None, list[pa.Table] | None]], checkpoint_id: int
    ) -> Iterator[pa.RecordBatch]:
        """The feed rows of (key group, its tables before, its tables at ``checkpoint_id``)."""
        op, meta = self.op, self.meta
        assert op is not None and meta is not None and op.key_type is not None
        pickle = self.options.allow_pickle
        for kg, old, new in groups:
            before = stored_rows(old, meta, op.key_type, kg, pickle)
            after = stored_rows(new, meta, op.key_type, kg, pickle)
            diff = scope_diff(before, after, meta.kind)
            if not diff.empty:
                yield from self._changes(diff.deletes, diff.upserts, checkpoint_id)

    def _changes(
        self, deletes: pa.Table | None, upserts: pa.Table | None, checkpoint_id: int
    ) -> Iterator[pa.RecordBatch]:
        """Feed rows of one key group: its deletes (scope columns read), then its upserts."""
        op, meta = self.op, self.meta
        assert op is not None and meta is not None and op.key_type is not None
        keys = self._wanted_keys()
        if keys is not None:
            deletes = None if deletes is None else rows_of_keys(deletes, keys, op.key_type)
            upserts = None if upserts is None else rows_of_keys(upserts, keys, op.key_type)
        view = None if upserts is None else keyed_view(upserts, meta, self.options.flatten, None)
        rows = change_rows(deletes, view, self.arrow_schema, checkpoint_id)
        if rows is not None:
            yield from rows.to_batches()
