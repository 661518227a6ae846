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
        if options.timers:
            from .timers import timers_schema

            return from_arrow_schema(timers_schema(open_for_read(options), options))
        return from_arrow_schema(view_schema_of(options, open_for_read(options)))

    def reader(self, schema: StructType) -> DataSourceReader:
        from pyspark.sql.pandas.types import to_arrow_schema

        from .reader import FlinkStateReader, open_for_read

        options = ReadOptions.parse(self.options)
        arrow = to_arrow_schema(schema, timezone="UTC")
        if options.timers:
            from .timers import TimerReader

            return TimerReader(options, open_for_read(options), arrow)
        return FlinkStateReader(options, open_for_read(options), arrow)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from .writer import BootstrapWriter

        return BootstrapWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:  # noqa: N802 - Spark's name
        from .stream import StateSink

        return StateSink(self.options, schema)
