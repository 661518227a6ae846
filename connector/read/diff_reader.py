"""Reading one state's changes between two snapshots (option ``diffAgainst``).

The snapshot loaded is the new side, ``diffAgainst`` the old one; either may be one of ours
or a Flink savepoint. Rows are the change feed's (:func:`flinkstate.checkpoint.change_rows`:
the state's flattened view, ``checkpoint_id`` of the new side, ``change_type`` ``delete`` or
``update``), planned once on the driver (:func:`flinkstate.checkpoint.plan_state_diff`). A keyed
state is read in partitions of ``keyGroupsPerPartition`` comparison units (key groups when both
sides have the same max parallelism), each executor opening both sides' files for its units;
operator state's few elements are compared on the driver. Key filters are left to Spark; the
options ``keys`` and ``keyGroups`` narrow what is read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from flinkstate.checkpoint import DiffSettings, ScopeDiff, StateDiff, change_rows, open_side, plan_state_diff
from flinkstate.state import FlinkStateError

from ..errors import OptionError
from ..options import ReadOptions
from .checkpoint_reader import is_stand_in
from .savepoint_reader import spark_schema, to_spark


@dataclass(frozen=True)
class UnitsPartition(InputPartition):
    """Comparison units (residues of key groups) of a keyed state's diff."""

    units: tuple[int, ...]


def plan_diff(options: ReadOptions) -> StateDiff:
    """Both sides opened (the old one with the same storage options) and the state's diff planned."""
    assert options.diff is not None and options.operator is not None and options.state is not None
    types, pickle = options.declared, options.allow_pickle
    old = open_side(options.diff.against, options.storage, options.diff.checkpoint_id, pickle, types)
    new = open_side(options.path, options.storage, options.checkpoint_id, pickle, types)
    settings = DiffSettings(
        options.keys, options.key_groups, options.diff.compare_ttl, options.include_expired
    )
    try:
        return plan_state_diff(old, new, options.operator, options.state, settings)
    except FlinkStateError as exc:
        if exc.code in ("INVALID_OPTION", "INVALID_ARGUMENT"):
            raise OptionError(exc.detail) from exc
        raise


def diff_schema(options: ReadOptions, plan: StateDiff) -> pa.Schema:
    return spark_schema(plan.schema)


class DiffReader(DataSourceReader):
    """Reads a planned :class:`~flinkstate.checkpoint.StateDiff`; see the module docstring."""

    def __init__(self, options: ReadOptions, plan: StateDiff, schema: pa.Schema) -> None:
        self.options = options
        self.plan = plan
        self.arrow_schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        keyed = self.plan.keyed
        if keyed is None:
            return [InputPartition(0)]
        return [UnitsPartition(part.units) for part in keyed.split(self.options.key_groups_per_partition)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if is_stand_in(partition):
            return
        keyed = self.plan.keyed
        if isinstance(partition, UnitsPartition):
            assert keyed is not None
            diffs: Iterator[ScopeDiff] = replace(keyed, units=partition.units).changes()
        else:
            diffs = self.plan.diffs()
        for diff in diffs:
            rows = change_rows(diff.deletes, diff.upserts, self.plan.schema, self.plan.checkpoint_id)
            if rows is not None:
                yield from to_spark(rows, self.arrow_schema).to_batches()
