"""``df.writeStream.format("flinkstate")``: every micro-batch upserts into keyed state.

Tasks write the batch's rows as upsert files under ``<path>/_data`` (an optional
``opColumn`` marks deletes). The driver's commit adds them, in order, to the latest
version and commits a new version that records Spark's batch id. Spark commits at least
once: a batch id that is not after the recorded one changes nothing (its files are
deleted), so a replay is harmless, and a restarted query simply continues. When a
subtask holds more than ``COMPACT_AFTER`` files of the state they are merged into one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from flinkstate.checkpoint import CheckpointExistsError, Manifest, publish_manifest
from flinkstate.checkpoint.format import storage_table, write_row_groups
from flinkstate.checkpoint.manifest import FileRef, OperatorEntry, SubtaskEntry
from flinkstate.checkpoint.merge import merge_keyed
from flinkstate.checkpoint.restore import CompletedCheckpoint
from flinkstate.checkpoint.storage import Storage
from flinkstate.checkpoint.versions import (
    DATA_DIR,
    completed_ids,
    load_version,
    rebase,
    replace_operator,  # fmt: skip
    version_ids,
)
from flinkstate.state.keygroups import KeyGroupRange

from .encode import make_plan
from .options import OptionError, WriteOptions
from .writer import operator_entry, store, task_files, write_task

BATCH_ID = "spark.batch_id"
COMPACT_AFTER = 16
RETAIN = 3


class StateSink(DataSourceStreamArrowWriter):
    """See the module docstring."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.options = WriteOptions.parse(options)
        if self.options.state_type not in ("value", "list", "map"):
            raise OptionError(
                f"the streaming sink writes keyed state (value, list, map), not {self.options.state_type}"
            )
        self.plan = make_plan(self.options, to_arrow_schema(schema, timezone="UTC"), streaming=True)

    def _root(self) -> Storage:
        return Storage(self.options.path, self.options.storage)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_task(self.plan, self._root().child(DATA_DIR), iterator, streaming=True)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        root = self._root()
        files = task_files(messages)
        done = completed_ids(root)
        base = load_version(root, done[-1]) if done else None
        if base is not None and batchId <= int(base.properties.get(BATCH_ID, "-1")):
            self._delete(root, files)  # a replayed batch: already committed
            return
        ids = version_ids(root)
        version = (ids[-1] if ids else 0) + 1
        new_dir = f"chk-{version}"
        moved = [(i, _from_data(ref)) for i, ref in files]
        if base is not None:
            base = rebase(base, f"chk-{done[-1]}", new_dir)
        old = base.operator(self.options.operator) if base is not None else None
        op = _append(operator_entry(self.plan, [], old), old, moved, self.options.state)
        op = self._compact(root, new_dir, op)
        manifest = replace_operator(base or Manifest(version), op)
        manifest = Manifest(
            version, "checkpoint", manifest.operators, {BATCH_ID: str(batchId)}, int(time.time() * 1000)
        )
        try:
            publish_manifest(
                root.child(new_dir), manifest, [], root=root, retain=self.options.retain or RETAIN
            )
        except CheckpointExistsError:
            self._delete(root, files)
            raise

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        self._delete(self._root(), task_files(messages))

    @staticmethod
    def _delete(root: Storage, files: list[tuple[int, FileRef]]) -> None:
        for _, ref in files:
            root.child(DATA_DIR).delete(ref.path)

    def _compact(self, root: Storage, new_dir: str, op: OperatorEntry) -> OperatorEntry:
        """Merge a subtask's files of the state into one when there are too many."""
        meta = op.keyed_state(self.options.state)
        assert meta is not None and op.key_type is not None
        subtasks = []
        for st in op.subtasks:
            refs = st.keyed.get(meta.name, ())
            if len(refs) <= COMPACT_AFTER:
                subtasks.append(st)
                continue
            reader = CompletedCheckpoint(root.child(new_dir), Manifest(0, operators=(op,)), allow_pickle=True)
            tables = []
            rng = None if st.key_group_range is None else KeyGroupRange(*st.key_group_range)
            for kg, parts in reader.read_keyed(op.uid, meta.name, rng):
                merged = merge_keyed(parts, meta, op.key_type, allow_pickle=True)
                if len(merged):
                    tables.append((kg, storage_table(meta, op.key_type, kg, merged)))
            keyed = dict(st.keyed)
            keyed.pop(meta.name)
            if tables:
                written = write_row_groups(tables[0][1].schema, tables)
                ref = store(root.child(DATA_DIR), "compacted", st.index, written)
                keyed[meta.name] = (_from_data(ref),)
            subtasks.append(SubtaskEntry(st.index, st.key_group_range, keyed, st.operator, st.broadcast,
                                         st.raw_keyed, st.raw_operator))  # fmt: skip
        return OperatorEntry(op.uid, op.parallelism, op.max_parallelism, op.key_type, op.keyed_states,
                             op.operator_states, tuple(subtasks))  # fmt: skip


def _from_data(ref: FileRef) -> FileRef:
    """A file written under ``_data``, as seen from a version directory."""
    from dataclasses import replace

    return replace(ref, path=f"../{DATA_DIR}/{ref.path}")


def _append(
    op: OperatorEntry, old: OperatorEntry | None, files: list[tuple[int, FileRef]], state: str
) -> OperatorEntry:
    """``op`` with the state's earlier files (from ``old``) followed by this batch's."""
    subtasks = []
    for st in op.subtasks:
        earlier = old.subtasks[st.index].keyed.get(state, ()) if old is not None else ()
        mine = tuple(ref for i, ref in files if i == st.index)
        keyed = dict(st.keyed)
        if earlier or mine:
            keyed[state] = (*earlier, *mine)
        subtasks.append(SubtaskEntry(st.index, st.key_group_range, keyed, st.operator, st.broadcast,
                                     st.raw_keyed, st.raw_operator))  # fmt: skip
    return OperatorEntry(op.uid, op.parallelism, op.max_parallelism, op.key_type, op.keyed_states,
                         op.operator_states, tuple(subtasks))  # fmt: skip
