"""The ``flinkstate`` Python data source: ``spark.read.format("flinkstate")`` and writes.

A read is decided once per data source instance (:func:`plan_read`): the options are parsed,
the checkpoint opened (its ``_metadata`` read once), and the view chosen: a Flink savepoint,
an operator's timers, a change feed, a state's diff between two snapshots, or one of our
checkpoint's views (metadata, keyed, operator). The plan is kept on the instance, which Spark
pickles from ``schema()`` to ``reader()`` (they may run in separate worker processes), so
neither opens it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from .options import ReadOptions, WriteOptions


@dataclass(frozen=True)
class ReadPlan:
    """What a read reads (``source``: a checkpoint, a range of them, a Flink savepoint) and how:
    ``schema_of(options, source)`` its view's schema, ``reader_of(options, source, schema)``
    its reader. Module-level functions: the plan pickles by reference to them."""

    options: ReadOptions
    source: Any
    schema_of: Callable[[ReadOptions, Any], pa.Schema]
    reader_of: Callable[[ReadOptions, Any, pa.Schema], DataSourceReader]

    def schema(self) -> pa.Schema:
        return self.schema_of(self.options, self.source)

    def reader(self, schema: pa.Schema) -> DataSourceReader:
        return self.reader_of(self.options, self.source, schema)


def plan_read(options: ReadOptions) -> ReadPlan:
    """The one dispatch of a read (see the module docstring)."""
    from flinkstate.checkpoint import CheckpointNotFoundError, CompletedCheckpoint, open_checkpoint
    from flinkstate.checkpoint.flink import is_flink_savepoint

    from .read.changefeed.reader import ChangeFeedReader, change_feed_schema_of, open_range
    from .read.checkpoint_reader import FlinkStateReader, view_schema_of
    from .read.savepoint_reader import (
        FlinkSavepointReader,
        check_not_declaring,
        check_options,
        flink_schema,
        with_flink_version,
    )
    from .read.timer_reader import TimerReader, timers_schema

    if options.diff is not None:  # two snapshots, ours or Flink's, either side
        from .read.diff_reader import DiffReader, diff_schema, plan_diff

        return ReadPlan(options, plan_diff(options), diff_schema, DiffReader)
    if options.read_change_feed:  # a root of retained checkpoints, never a Flink savepoint
        check_not_declaring(options)
        return ReadPlan(options, open_range(options), change_feed_schema_of, ChangeFeedReader)
    try:
        opened = open_checkpoint(
            options.path, options.storage, options.checkpoint_id, options.allow_pickle, options.declared
        )
    except CheckpointNotFoundError:  # an option that cannot apply here is the clearer error
        if options.checkpoint_id is not None and is_flink_savepoint(options.path, options.storage):
            check_options(options)  # refuses checkpointId, naming it
        check_not_declaring(options)
        raise
    if not isinstance(opened, CompletedCheckpoint):
        return ReadPlan(options, with_flink_version(opened, options), flink_schema, FlinkSavepointReader)
    check_not_declaring(options)
    if options.timers:
        return ReadPlan(options, opened, timers_schema, TimerReader)
    return ReadPlan(options, opened, view_schema_of, FlinkStateReader)


class FlinkStateDataSource(DataSource):
    """Checkpoints and savepoints as DataFrames, and DataFrames as savepoints."""

    @classmethod
    def name(cls) -> str:
        return "flinkstate"

    def _plan(self) -> ReadPlan:
        """The read's plan, made on first use and kept (pickled along with the instance)."""
        plan: ReadPlan | None = self.__dict__.get("_read_plan")
        if plan is None:
            plan = self._read_plan = plan_read(ReadOptions.parse(self.options))
        return plan

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self._plan().schema())

    def reader(self, schema: StructType) -> DataSourceReader:
        from pyspark.sql.pandas.types import to_arrow_schema

        return self._plan().reader(to_arrow_schema(schema, timezone="UTC"))

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from .write.batch import BootstrapWriter
        from .write.savepoint_writer import FlinkSavepointWriter

        if WriteOptions.parse(self.options).flink:
            return FlinkSavepointWriter(self.options, schema, overwrite)
        return BootstrapWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:  # noqa: N802 - Spark's name
        from .write.stream import StateSink

        return StateSink(self.options, schema)
