"""The timers view: ``spark.read.format("flinkstate").option("operator", uid)
.option("timers", "true")`` lists an operator's registered timers as rows
(``key_group``, ``key``, ``namespace``, ``time_domain``, ``timestamp``).

Timers are keyed map states (see :mod:`flinkstate.state.process.timers`); this view reads
each time domain's state with the keyed reader and reshapes its rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from flinkstate.checkpoint import CompletedCheckpoint, keyed_view_schema, spark_compatible
from flinkstate.state.process import TIMER_STATES

from ..options import ReadOptions
from .checkpoint_reader import FlinkStateReader, is_stand_in


def timers_schema(options: ReadOptions, checkpoint: CompletedCheckpoint) -> pa.Schema:
    op = checkpoint.operator(options.operator or "")
    key = spark_compatible(op.key_type.to_arrow()) if op.key_type is not None else pa.string()
    return pa.schema(
        [
            pa.field("key_group", pa.int32()),
            pa.field("key", key),
            pa.field("namespace", pa.string()),
            pa.field("time_domain", pa.string()),
            pa.field("timestamp", pa.int64()),
        ]
    )


@dataclass(frozen=True)
class TimerPartition(InputPartition):
    reader: int
    inner: InputPartition


class TimerReader(DataSourceReader):
    """Reads the timer states of every time domain an operator has."""

    def __init__(self, options: ReadOptions, checkpoint: CompletedCheckpoint, schema: pa.Schema) -> None:
        op = checkpoint.operator(options.operator or "")
        self.arrow_schema = schema
        self.readers: list[tuple[str, FlinkStateReader]] = []
        for domain, name in TIMER_STATES.items():
            meta = op.keyed_state(name)
            if meta is not None:
                inner = replace(options, state=name, flatten=True, timers=False)
                view = keyed_view_schema(meta, op.key_type, True)
                self.readers.append((domain.name, FlinkStateReader(inner, checkpoint, view)))

    def partitions(self) -> Sequence[InputPartition]:
        return [TimerPartition(i, p) for i, (_, r) in enumerate(self.readers) for p in r.partitions()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if is_stand_in(partition):  # no timers
            return
        assert isinstance(partition, TimerPartition)
        domain, reader = self.readers[partition.reader]
        for batch in reader.read(partition.inner):
            n = batch.num_rows
            columns = {
                "key_group": batch.column("key_group"),
                "key": batch.column("key"),
                "namespace": pa.nulls(n, pa.string()),
                "time_domain": pa.array([domain] * n, pa.string()),
                "timestamp": batch.column("user_key").cast(pa.int64()),
            }
            table = pa.table(columns).select(self.arrow_schema.names).cast(self.arrow_schema)
            yield from table.to_batches()
