"""The ``flinkstate`` Python data source: ``spark.read.format("flinkstate")`` and writes."""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from .options import ReadOptions


class FlinkStateDataSource(DataSource):
    """Checkpoints and savepoints as DataFrames, and DataFrames as savepoints."""

    @classmethod
    def name(cls) -> str:
        return "flinkstate"

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        from .reader import open_for_read, view_schema_of

        options = ReadOptions.parse(self.options)
        if _is_flink(options):
            from .flink_source import flink_schema

            return from_arrow_schema(flink_schema(options))
        from .flink_source import check_not_declaring

        check_not_declaring(options)
        if options.timers:
            from .timers import timers_schema

            return from_arrow_schema(timers_schema(open_for_read(options), options))
        if options.read_change_feed:
            from .changefeed import change_feed_schema, open_range

            last = open_range(options)[-1]
            schema = change_feed_schema(
                last.operator(options.operator or ""), options.state or "", options.flatten
            )
            return from_arrow_schema(schema)
        return from_arrow_schema(view_schema_of(options, open_for_read(options)))

    def reader(self, schema: StructType) -> DataSourceReader:
        from pyspark.sql.pandas.types import to_arrow_schema

        from .reader import FlinkStateReader, open_for_read

        options = ReadOptions.parse(self.options)
        arrow_schema = to_arrow_schema(schema, timezone="UTC")
        if _is_flink(options):
            from .flink_source import FlinkSavepointReader

            return FlinkSavepointReader(options, arrow_schema)
        from .flink_source import check_not_declaring

        check_not_declaring(options)
        if options.timers:
            from .timers import TimerReader

            return TimerReader(options, open_for_read(options), arrow_schema)
        if options.read_change_feed:
            from .changefeed import ChangeFeedReader, open_range

            return ChangeFeedReader(options, open_range(options), arrow_schema)
        return FlinkStateReader(options, open_for_read(options), arrow_schema)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from .writer import BootstrapWriter

        return BootstrapWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:  # noqa: N802 - Spark's name
        from .stream import StateSink

        return StateSink(self.options, schema)


def _is_flink(options: ReadOptions) -> bool:
    """Whether ``path`` is a Flink savepoint or checkpoint (a ``_metadata`` of Flink's)."""
    from .flink_source import is_flink

    return is_flink(options)
