"""``df.writeStream.format("flinkstate")``: every micro-batch upserts into keyed state.

Tasks write the batch's rows as upsert files under ``<path>/_data`` (an optional
``opColumn`` marks deletes). The driver's commit adds them, in order, to the latest
version and commits a new version that records Spark's batch id. Spark commits at least
once: the recorded batch id again changes nothing (its files are deleted), so a replay is
harmless and a restarted query simply continues; an earlier batch id is an error
(``[BATCH_ID_BEHIND]``: a reset checkpointLocation or another query), never skipped.

Every version is an incremental checkpoint (see :class:`flinkstate.checkpoint.ChainPolicy`):
a batch's files are deltas with the version as their origin, after the files of earlier
versions. When a subtask's chain grows past the chain policy (more than ``COMPACT_AFTER``
files, or deltas larger than the base) it is merged into one full file; the batch's own
files then stay beside it for the change feed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from flinkstate.checkpoint import (
    DATA_DIR,
    ChainPolicy,
    CheckpointError,
    CheckpointExistsError,
    CommitFilesMissingError,
    FileRef,
    OperatorEntry,
    Storage,
    begin_append,
    compacted_chain,
    store_state_file,
)

from ..errors import OptionError
from ..options import WriteOptions
from ..shared_root import spark_process
from .batch import operator_entry, task_files, write_task
from .plan import make_plan

BATCH_ID = "spark.batch_id"
COMPACT_AFTER = 16
POLICY = ChainPolicy(max_files=COMPACT_AFTER)
RETAIN = 3


class StateSink(DataSourceStreamArrowWriter):
    """See the module docstring."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.options = WriteOptions.parse(options)
        if self.options.flink:
            raise OptionError(
                "the streaming sink writes our checkpoints; option format flink is for batch writes"
            )
        if self.options.state_type not in ("value", "list", "map"):
            raise OptionError(
                f"the streaming sink writes keyed state (value, list, map), not {self.options.state_type}"
            )
        self.plan = make_plan(self.options, to_arrow_schema(schema, timezone="UTC"), streaming=True)
        self.driver = spark_process()

    def _root(self) -> Storage:
        return Storage(self.options.path, self.options.storage)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_task(
            self.plan, self._root().child(DATA_DIR), iterator, streaming=True, driver=self.driver
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        root = self._root()
        files = task_files(messages)
        append = begin_append(root)
        base = append.load_base(root)
        last = int(base.properties.get(BATCH_ID, "-1")) if base is not None else -1
        if batchId <= last:
            self._delete(root, files)
            if batchId == last:  # a replayed batch: already committed
                return
            raise CheckpointError(
                f"batch {batchId} is before batch {last}, the last one committed to "
                f"{self.options.path}: the query's checkpointLocation was reset or belongs to "
                "another query, and its batches would be lost. Restart it with the "
                f"checkpointLocation that committed batch {last}, or write to a new path",
                code="BATCH_ID_BEHIND",
            )
        version = append.version
        moved = [(i, replace(_from_data(ref), checkpoint_id=version, delta=True)) for i, ref in files]
        old = base.operator(self.options.operator) if base is not None else None
        op = _append(operator_entry(self.plan, [], old), old, moved, self.options.state)
        op = self._compact(root, append.directory, op, version, moved)
        try:
            append.commit(root, base, [op], kind="checkpoint", properties={BATCH_ID: str(batchId)},
                          retain=self.options.retain or RETAIN)  # fmt: skip
        except (CheckpointExistsError, CommitFilesMissingError):  # nothing published
            self._delete(root, files)
            raise

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        self._delete(self._root(), task_files(messages))

    @staticmethod
    def _delete(root: Storage, files: list[tuple[int, FileRef]]) -> None:
        for _, ref in files:
            root.child(DATA_DIR).delete(ref.path)

    def _compact(
        self, root: Storage, new_dir: str, op: OperatorEntry, version: int, batch: list[tuple[int, FileRef]]
    ) -> OperatorEntry:
        """Merge a subtask's chain of the state into one file when it is past the policy."""
        state = self.options.state
        subtasks = []
        for st in op.subtasks:
            refs = st.keyed.get(state, ())
            if not refs or not POLICY.exceeded(refs):
                subtasks.append(st)
                continue
            written = compacted_chain(root.child(new_dir), op, state, st, allow_pickle=True)
            keyed = dict(st.keyed)
            keyed.pop(state)
            if written is not None:
                ref = store_state_file(root.child(DATA_DIR), "compacted", st.index, written)
                keyed[state] = (replace(_from_data(ref), checkpoint_id=version),)
            mine = tuple(ref for i, ref in batch if i == st.index)
            changes = {**st.changes, state: mine} if mine else dict(st.changes)
            subtasks.append(replace(st, keyed=keyed, changes=changes))
        return replace(op, subtasks=tuple(subtasks))


def _from_data(ref: FileRef) -> FileRef:
    """A file written under ``_data``, as seen from a version directory."""
    return replace(ref, path=f"../{DATA_DIR}/{ref.path}")


def _append(
    op: OperatorEntry, old: OperatorEntry | None, files: list[tuple[int, FileRef]], state: str
) -> OperatorEntry:
    """``op`` with the state's earlier files (from ``old``) followed by this batch's."""
    written = {st.index: st for st in old.subtasks} if old is not None else {}
    subtasks = []
    for st in op.subtasks:
        earlier = written[st.index].keyed.get(state, ()) if st.index in written else ()
        mine = tuple(ref for i, ref in files if i == st.index)
        keyed = dict(st.keyed)
        if earlier or mine:
            keyed[state] = (*earlier, *mine)
        subtasks.append(replace(st, keyed=keyed, changes={}))  # earlier versions' changes stay theirs
    return replace(op, subtasks=tuple(subtasks))
