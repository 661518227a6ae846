"""Reading checkpoints into DataFrames: planning partitions, pushing filters, reading batches.

Partitions are small picklable descriptions (files and row groups); executors open the
files themselves and read them with :func:`flinkstate.checkpoint.read_key_groups`. Filters
on ``key_group``, on the ``key`` (equality or IN on a non-float key: the key's group is
computed, and only it is read) and on ``subtask`` are pushed down and applied exactly (see
:mod:`.pushdown`); everything else is left to Spark. Where nothing matches, no partition is
planned and the read is empty.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from flinkstate.checkpoint import (
    METADATA_SCHEMA,
    CompletedCheckpoint,
    FileRef,
    KeyGroupFiles,
    OperatorEntry,
    Storage,
    expiry_cutoff,
    key_group_files,
    key_group_rows,
    keyed_view_schema,
    metadata_table,
    native_key_groups,
    only_key_groups,
    operator_rows,
    operator_view_schema,
    read_key_groups,
)
from flinkstate.state import StateKind, StateMetaInfo, assign_to_key_group
from flinkstate.state.operator import OperatorStateMode

from ..errors import OptionError
from ..options import ReadOptions
from .pushdown import Pushdown
from .selection import Selection, keyed_selection, operator_selection

BATCH_ROWS = 1 << 16
"""Rows per Arrow batch handed to Spark (key groups are gathered into batches this big)."""


@dataclass(frozen=True)
class KeyedPartition(InputPartition):
    """Row groups of one subtask's files: ((file, ((key group, row group), ...)), ...)."""

    files: KeyGroupFiles


@dataclass(frozen=True)
class NativePartition(InputPartition):
    """Key groups of one subtask held as native RocksDB files (read all at once: opening
    them means downloading the subtask's files)."""

    subtask: int
    key_groups: tuple[int, ...]


@dataclass(frozen=True)
class OperatorPartition(InputPartition):
    subtask: int
    files: tuple[FileRef, ...]


@dataclass(frozen=True)
class MetadataPartition(InputPartition):
    checkpoint_id: int


def is_stand_in(partition: InputPartition) -> bool:
    """Whether ``partition`` is Spark's stand-in, which it reads when a reader plans none
    (nothing matches): such a read yields no rows."""
    return type(partition) is InputPartition and partition.value is None


class FlinkStateReader(DataSourceReader):
    """Reads one view of one checkpoint; see the module docstring."""

    def __init__(self, options: ReadOptions, checkpoint: CompletedCheckpoint, schema: pa.Schema) -> None:
        self.options = options
        self.directory_url = checkpoint.directory.url
        self.checkpoint_id = checkpoint.checkpoint_id
        self.arrow_schema = schema
        self.manifest = checkpoint.manifest
        self.op: OperatorEntry | None = None
        self.meta: StateMetaInfo | None = None
        self.operator_mode: OperatorStateMode | None = None
        self.selection = Selection()
        if options.operator is not None:
            self.op = checkpoint.operator(options.operator)
            self.meta = self.op.keyed_state(options.state or "")
            if self.meta is None:
                self.operator_mode = _operator_mode(self.op, options.state or "")
                self.selection = operator_selection(options, self.op, self.operator_mode)
            else:
                self.selection = keyed_selection(options, self.op)
        key_type = self.op.key_type if self.op is not None else None
        list_state = self.operator_mode not in (None, OperatorStateMode.BROADCAST)
        self.pushdown = Pushdown(keyed=self.meta is not None, key_type=key_type, subtasks=list_state)
        self.pushdown.install(self)

    def _wanted_key_groups(self) -> set[int] | None:
        """Key groups the pushed filters and the options allow (``None``: all)."""
        op = self.op
        assert op is not None

        def group_of(key: Any) -> int:
            return assign_to_key_group(key, op.max_parallelism, op.key_type)

        keys = self.pushdown.keys(None)
        return self.pushdown.wanted_key_groups(op.max_parallelism, keys, group_of, self.selection.key_groups)

    def _wanted_keys(self) -> list[Any] | None:
        """Keys the ``keys`` option and pushed key filters allow (``None``: all)."""
        return self.pushdown.keys(self.selection.keys)

    # -- planning ------------------------------------------------------------------------

    def partitions(self) -> Sequence[InputPartition]:
        if self.op is None:
            return [MetadataPartition(self.checkpoint_id)]
        if self.meta is None:
            return self._operator_partitions()
        wanted = self._wanted_key_groups()
        size = self.options.key_groups_per_partition
        out: list[InputPartition] = []
        for subtask in self.op.subtasks:
            if subtask.native is not None:
                stored = subtask.stored_key_groups(self.meta.name)
                native = sorted(stored if wanted is None else stored & wanted)
                if native:
                    out.append(NativePartition(subtask.index, tuple(native)))
                continue
            files = key_group_files(subtask.keyed.get(self.meta.name, ()), wanted)
            groups = sorted({kg for _, pairs in files for kg, _ in pairs})
            for i in range(0, len(groups), size):
                out.append(KeyedPartition(only_key_groups(files, set(groups[i : i + size]))))
        return out

    def _operator_partitions(self) -> list[InputPartition]:
        assert self.op is not None
        name = self.options.state or ""
        out: list[InputPartition] = []
        for subtask in self.op.subtasks:
            broadcast = self.operator_mode is OperatorStateMode.BROADCAST
            refs = (subtask.broadcast if broadcast else subtask.operator).get(name, ())
            if not refs or not self.pushdown.subtask_allowed(subtask.index):
                continue
            if self.selection.subtasks is not None and subtask.index not in self.selection.subtasks:
                continue
            out.append(OperatorPartition(subtask.index, tuple(refs)))
            if broadcast:  # every subtask holds the same map: read one copy
                break
        return out

    # -- reading -------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.read_from(Storage(self.directory_url, self.options.storage), partition)

    def read_from(self, storage: Storage, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read ``partition`` through ``storage`` (whose counters then show the I/O)."""
        if isinstance(partition, MetadataPartition):
            yield from self._cast(metadata_table(self.manifest, self.checkpoint_id)).to_batches()
        elif isinstance(partition, OperatorPartition):
            yield from self._read_operator(storage, partition)
        elif isinstance(partition, KeyedPartition):
            columns = self._needed_columns(self._expired_before())
            groups = read_key_groups(storage, partition.files, self.checkpoint_id, columns)
            yield from self._read_keyed(groups)
        elif isinstance(partition, NativePartition):
            assert self.op is not None and self.meta is not None
            wanted, subtask = set(partition.key_groups), {partition.subtask}
            yield from self._read_keyed(
                native_key_groups(storage, self.op, self.meta, self.checkpoint_id, wanted, subtask)
            )
        elif not is_stand_in(partition):
            raise TypeError(f"not a partition of this reader: {partition!r}")

    def _expired_before(self) -> int | None:
        meta, op = self.meta, self.op
        assert meta is not None and op is not None
        watermark = self.options.watermark
        if watermark is None:  # by default, what a restore of the checkpoint would hide
            watermark = self.manifest.watermark(op.uid)
        return None if self.options.include_expired else expiry_cutoff(meta, watermark)

    def _read_keyed(self, groups: Iterator[tuple[int, list[pa.Table]]]) -> Iterator[pa.RecordBatch]:
        """Rows of the key groups ``groups`` yields (their tables as stored)."""
        meta, op = self.meta, self.op
        assert meta is not None and op is not None
        expired_before = self._expired_before()
        keys = self._wanted_keys()
        pending: list[pa.Table] = []
        rows = 0
        for kg, tables in groups:
            view = key_group_rows(
                tables, kg, meta, op.key_type, keys=keys, flatten=self.options.flatten,
                expired_before=expired_before, allow_pickle=self.options.allow_pickle,
            )  # fmt: skip
            if view is not None:
                pending.append(self._cast(view))
                rows += view.num_rows
            if rows >= BATCH_ROWS:
                yield from pa.concat_tables(pending).to_batches(max_chunksize=BATCH_ROWS)
                pending, rows = [], 0
        if pending:
            yield from pa.concat_tables(pending).to_batches(max_chunksize=BATCH_ROWS)

    def _needed_columns(self, expired_before: int | None) -> set[str]:
        """The stored columns the requested view columns need (Spark prunes none for us)."""
        meta = self.meta
        assert meta is not None
        wanted = {"position": "value"}
        needed = {"key_group", "key"} | {wanted.get(n, n) for n in self.arrow_schema.names}
        if meta.kind is not StateKind.MAP:
            needed.add("value")  # a null value or empty list stores nothing (no row); list elements are rows
        if meta.kind is StateKind.MAP and not self.options.flatten:
            needed |= {"namespace", "user_key", "value"}  # entries folded per scope
        if expired_before is not None:
            needed.add("ttl_timestamp")
        return needed

    def _read_operator(self, storage: Storage, partition: OperatorPartition) -> Iterator[pa.RecordBatch]:
        broadcast = self.operator_mode is OperatorStateMode.BROADCAST
        view = operator_rows(storage, partition.files, partition.subtask, broadcast)
        if view is not None:
            yield from self._cast(view).to_batches()

    def _cast(self, view: pa.Table) -> pa.Table:
        """The columns Spark asked for, in its exact Arrow schema."""
        names = self.arrow_schema.names
        missing = [n for n in names if n not in view.column_names]
        if missing:
            raise OptionError(
                f"the schema asks for columns {missing} that this view does not have; "
                f"it has {view.column_names}"
            )
        return view.select(names).cast(self.arrow_schema)


def _operator_mode(op: OperatorEntry, state: str) -> OperatorStateMode:
    modes = [i.mode for i in op.operator_states if i.name == state]
    if not modes:
        names = sorted({s.name for s in op.keyed_states} | {i.name for i in op.operator_states})
        raise OptionError(
            f"operator {op.uid!r} has no state {state!r}; its states: {names}", code="UNKNOWN_STATE"
        )
    if len(modes) > 1:
        raise OptionError(f"operator {op.uid!r} has a list and a broadcast state both named {state!r}")
    mode: OperatorStateMode = modes[0]
    return mode


def view_schema_of(options: ReadOptions, checkpoint: CompletedCheckpoint) -> pa.Schema:
    """The Arrow schema of the view the options select."""
    if options.operator is None:
        return METADATA_SCHEMA
    op = checkpoint.operator(options.operator)
    meta = op.keyed_state(options.state or "")
    if meta is not None:
        return keyed_view_schema(meta, op.key_type, options.flatten)
    mode = _operator_mode(op, options.state or "")
    info = next(i for i in op.operator_states if i.name == options.state and i.mode is mode)
    return operator_view_schema(
        info.value_type, info.user_key_type if mode is OperatorStateMode.BROADCAST else None
    )
