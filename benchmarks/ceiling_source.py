"""The most any Python data source can do in Spark: a reader that yields prebuilt Arrow
batches (no I/O, no decoding) and a writer that drops what it is given.

P6 and P7 compare flinkstate with Spark's JVM Parquet reader and writer; these two show
how much of that gap is the Python data source transport itself (Arrow batches between
the JVM and Python workers, rows built from them), which no Python source can avoid.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

BATCH = 1 << 16


class CeilingReader(DataSourceReader):
    def __init__(self, rows: int, partitions: int, schema: pa.Schema) -> None:
        self.rows, self.parts, self.schema = rows, partitions, schema

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(i) for i in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        share = self.rows // self.parts
        for start in range(0, share, BATCH):
            n = min(BATCH, share - start)
            keys = pa.array(np.arange(start, start + n, dtype=np.int64))
            columns = {"key_group": pa.array(np.zeros(n, dtype=np.int32)), "key": keys, "value": keys}
            yield pa.RecordBatch.from_arrays(
                [columns.get(f.name, pa.nulls(n, f.type)) for f in self.schema], schema=self.schema
            )


class DropWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()


class CeilingSource(DataSource):
    """Options: ``rows``, ``partitions``; the schema is given with ``.schema(...)``."""

    @classmethod
    def name(cls) -> str:
        return "ceiling"

    def reader(self, schema: Any) -> DataSourceReader:
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow = to_arrow_schema(schema)
        return CeilingReader(int(self.options["rows"]), int(self.options["partitions"]), arrow)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
        return DropWriter()


def register(spark: Any) -> None:
    """Register the source, pickled by value (workers cannot import ``benchmarks/``)."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(CeilingSource)
