"""``df.write.format("flinkstate")``: bootstrap a savepoint from a DataFrame.

Every write adds a version ``chk-<n>`` under the path. ``overwrite`` makes a version
holding only this state; ``append`` derives the new version from the latest one, with
this state added or replaced and everything else referenced, not copied; the previous
version stays readable (``checkpointId``) until removed. Tasks write uniquely named
files and report them; the driver's commit writes the manifest (create-if-absent), so
retried and speculative tasks never duplicate rows: only the files in the commit
messages Spark hands over are referenced, and the rest are deleted. A broadcast state
is one map, the same on every subtask: the commit merges the tasks' maps into one file
(partition order, a later row winning a duplicate key, as for keyed value states) that
every subtask references.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from flinkstate.checkpoint import (
    METADATA,
    FileRef,
    OperatorEntry,
    Storage,
    SubtaskEntry,
    begin_append,
    broadcast_map_file,
    keyed_state_files,
    operator_state_file,
    refuse_native,
    store_state_file,
)
from flinkstate.state import compute_key_group_range_for_operator_index
from flinkstate.state.operator import OperatorStateMode

from ..errors import OptionError
from ..options import WriteOptions
from ..shared_root import refuse_unshared_task, spark_process
from .plan import WritePlan, make_plan, state_rows


@dataclass
class TaskFiles(WriterCommitMessage):
    """What one task wrote: (subtask index, file) pairs."""

    partition: int
    files: list[tuple[int, FileRef]] = field(default_factory=list)


def task_files(messages: list[WriterCommitMessage | None]) -> list[tuple[int, FileRef]]:
    """The (subtask, file) pairs of every task, in partition order."""
    tasks = sorted((m for m in messages if isinstance(m, TaskFiles)), key=lambda m: m.partition)
    return [f for m in tasks for f in m.files]


def partition_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return 0 if context is None else context.partitionId()


def write_task(
    plan: WritePlan,
    directory: Storage,
    batches: Iterator[pa.RecordBatch],
    streaming: bool,
    driver: str | None,
) -> TaskFiles:
    """Encode and store one task's rows; refused first (nothing written) when ``directory`` is a
    local path this task's host may not share with the driver (``driver``: its JVM, see
    :mod:`..shared_root`)."""
    refuse_unshared_task(directory, plan.options.shared_filesystem, driver)
    part = partition_id()
    message = TaskFiles(part)
    collected = list(batches)
    if not collected:
        return message
    table = pa.Table.from_batches(collected)
    if table.num_rows == 0:
        return message
    rows, opts = state_rows(plan, table, streaming), plan.options
    what = f"value column {', '.join(plan.value_columns)}"
    if plan.keyed:
        assert plan.key_type is not None
        files = keyed_state_files(
            rows, plan.meta(), plan.key_type, opts.max_parallelism, opts.parallelism, what
        )
        for index, written in sorted(files.items()):
            message.files.append((index, store_state_file(directory, f"t{part}", index, written)))
    else:
        index = part % opts.parallelism
        written = operator_state_file(rows, plan.operator_info(), what)
        message.files.append((index, store_state_file(directory, f"t{part}", index, written)))
    return message


def is_broadcast(plan: WritePlan) -> bool:
    return not plan.keyed and plan.operator_info().mode is OperatorStateMode.BROADCAST


def one_broadcast_map(plan: WritePlan, directory: Storage, refs: list[FileRef]) -> FileRef:
    """The tasks' broadcast maps (in partition order) as one file: a later row wins a key."""
    if len(refs) == 1:
        return refs[0]
    return store_state_file(
        directory, "broadcast", 0, broadcast_map_file(directory, refs, plan.operator_info())
    )


def operator_entry(
    plan: WritePlan, files: list[tuple[int, FileRef]], base: OperatorEntry | None
) -> OperatorEntry:
    """The operator entry with this state's files: ``base`` (when given) with the state added
    or replaced, every other field of it and of its subtasks kept."""
    opts = plan.options
    p, max_p = opts.parallelism, opts.max_parallelism
    if base is not None and (base.parallelism, base.max_parallelism) != (p, max_p):
        raise OptionError(
            f"operator {opts.operator!r} exists with parallelism {base.parallelism} and max parallelism "
            f"{base.max_parallelism}; write with the same, or use mode overwrite"
        )
    if base is not None and plan.keyed and base.key_type not in (None, plan.key_type):
        raise OptionError(
            f"operator {opts.operator!r} has key type {base.key_type}, this write {plan.key_type}"
        )
    refuse_native(base, "writing state into it")
    per_subtask: dict[int, list[FileRef]] = {i: [] for i in range(p)}
    for index, ref in files:
        per_subtask[index].append(ref)
    broadcast = is_broadcast(plan)
    written = {s.index: s for s in base.subtasks} if base is not None else {}
    subtasks = []
    for i in range(p):
        old = written.get(i, SubtaskEntry(i))  # a subtask that wrote nothing is an empty one
        mine = tuple(ref for _, ref in files) if broadcast else tuple(per_subtask[i])
        keyed, operator, bcast = dict(old.keyed), dict(old.operator), dict(old.broadcast)
        target = keyed if plan.keyed else bcast if broadcast else operator
        for group in (keyed, operator, bcast):
            group.pop(opts.state, None)
        if mine:
            target[opts.state] = mine
        rng = compute_key_group_range_for_operator_index(max_p, p, i)
        span = (rng.start, rng.end)
        subtasks.append(replace(old, key_group_range=span, keyed=keyed, operator=operator, broadcast=bcast))
    keyed_states = tuple(s for s in (base.keyed_states if base else ()) if s.name != opts.state)
    operator_states = tuple(s for s in (base.operator_states if base else ()) if s.name != opts.state)
    if plan.keyed:
        keyed_states += (plan.meta(),)
    else:
        operator_states += (plan.operator_info(),)
    key_type = plan.key_type if plan.keyed else (base.key_type if base else None)
    start = base if base is not None else OperatorEntry(opts.operator, p, max_p)
    return replace(start, key_type=key_type, keyed_states=keyed_states, operator_states=operator_states,
                   subtasks=tuple(subtasks))  # fmt: skip


class BootstrapWriter(DataSourceArrowWriter):
    """See the module docstring."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.options = WriteOptions.parse(options)
        self.plan = make_plan(self.options, to_arrow_schema(schema, timezone="UTC"))
        self.overwrite = overwrite
        root = Storage(self.options.path, self.options.storage)
        if root.exists(METADATA) and not overwrite:
            raise OptionError(
                f"{self.options.path} holds a single savepoint (its _metadata at the top); append "
                "needs a path written by Spark or a checkpoint root: use mode overwrite or another path",
                code="INVALID_PATH",
            )
        self.append = begin_append(root, derive=not overwrite)
        self.driver = spark_process()

    def _directory(self) -> Storage:
        return Storage(self.options.path, self.options.storage).child(self.append.directory)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskFiles:
        return write_task(self.plan, self._directory(), iterator, streaming=False, driver=self.driver)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        root = Storage(self.options.path, self.options.storage)
        files = written = task_files(messages)
        directory = self._directory()
        if is_broadcast(self.plan) and files:
            files = [(0, one_broadcast_map(self.plan, directory, [ref for _, ref in files]))]
        base = self.append.load_base(root)
        old = base.operator(self.options.operator) if base is not None else None
        op = operator_entry(self.plan, files, old)
        properties = {"writer": "spark", "mode": "overwrite" if self.overwrite else "append"}
        mine = sorted({ref.path for _, ref in (*written, *files)})
        # retention also deletes files of failed or speculative task attempts (unreferenced)
        self.append.commit(root, base, [op], kind="savepoint", properties=properties, written=mine,
                           retain=self.options.retain)  # fmt: skip
        if self.overwrite and root.exists(METADATA):
            root.delete(METADATA)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        directory = self._directory()
        for _, ref in task_files(messages):
            directory.delete(ref.path)
