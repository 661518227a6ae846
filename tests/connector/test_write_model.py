"""Savepoints written from DataFrames, restored and compared with plain Python models.

The data source's writer, sink and reader are driven as Spark drives them (each table
is one task, in partition order), without a JVM, so many cases run in a few seconds.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from flinkstate.checkpoint import open_checkpoint
from flinkstate.connector.source import FlinkStateDataSource
from flinkstate.connector.stream import StateSink
from flinkstate.state import MapStateDescriptor, Types


def _options(path: Path, **options: str) -> dict[str, str]:
    return {k.lower(): v for k, v in {"path": str(path), "operator": "op", **options}.items()}


def write(path: Path, tasks: list[pa.Table], overwrite: bool = True, **options: str) -> None:
    """A batch write: one task per table, committed in partition order."""
    source = FlinkStateDataSource(_options(path, **options))
    writer = source.writer(from_arrow_schema(tasks[0].schema), overwrite)
    messages = []
    for partition, table in enumerate(tasks):
        message = writer.write(iter(table.to_batches()))
        message.partition = partition
        messages.append(message)
    writer.commit(messages)


def stream_batch(path: Path, batch_id: int, tasks: list[pa.Table], **options: str) -> None:
    """One streaming micro-batch: one task per table."""
    sink = StateSink(_options(path, **options), from_arrow_schema(tasks[0].schema))
    messages = []
    for partition, table in enumerate(tasks):
        message = sink.write(iter(table.to_batches()))
        message.partition = partition
        messages.append(message)
    sink.commit(messages, batch_id)


def read(path: Path, **options: str) -> list[dict[str, Any]]:
    """Every row ``spark.read.format("flinkstate")`` gives, as dicts."""
    source = FlinkStateDataSource(_options(path, **options))
    schema = source.schema()
    reader = source.reader(schema)
    batches = [b for p in reader.partitions() for b in reader.read(p)]
    arrow = to_arrow_schema(schema, timezone="UTC")
    return pa.Table.from_batches(batches, schema=arrow).to_pylist() if batches else []


# -- broadcast state: one map, the same on every subtask ------------------------------

RULES = MapStateDescriptor("rules", Types.STRING(), Types.LONG())


def test_broadcast_from_several_tasks_is_one_map_on_every_subtask(tmp_path: Path) -> None:
    rng = random.Random(7)
    keys = ["r1", "r2", "régle", "ルール", "\U0001f600"]
    tasks = []
    for _ in range(4):
        n = rng.randrange(0, 6)
        rules = [rng.choice(keys) for _ in range(n)]
        values = [None if rng.random() < 0.2 else rng.randrange(100) for _ in range(n)]
        tasks.append(pa.table({"rule": pa.array(rules, pa.string()), "v": pa.array(values, pa.int64())}))
    model: dict[str, int | None] = {}  # partitions in order, rows in order: a later row wins
    for table in tasks:
        for row in table.to_pylist():
            model[row["rule"]] = row["v"]
    path = tmp_path / "sp"
    write(path, tasks, state="rules", stateType="broadcast", keyColumns="rule", valueColumns="v",
          parallelism="3")  # fmt: skip
    checkpoint = open_checkpoint(str(path))
    copies = [[f.path for f in st.broadcast["rules"]] for st in checkpoint.manifest.operators[0].subtasks]
    assert len(copies) == 3 and len(copies[0]) == 1 and all(c == copies[0] for c in copies)  # one map
    assert sorted((r["key"], r["value"]) for r in read(path, state="rules")) == sorted(model.items())
    for parallelism in (1, 2, 3, 5):
        for subtask in range(parallelism):
            ops = checkpoint.operator_backend("op", subtask, parallelism)
            assert dict(ops.get_broadcast_state(RULES).items()) == model
    listed = sorted(p.name for p in (path / "chk-1").iterdir())
    assert listed == sorted({"_metadata", *(f.path for f in checkpoint.manifest.files())})  # tasks' gone


def test_broadcast_with_row_keys_from_several_tasks(tmp_path: Path) -> None:
    rows = [("a", 1, "x"), ("b", 2, "y"), ("a", 1, "z"), ("a", 2, "ü")]
    tasks = [
        pa.table({"name": [r[0] for r in part], "n": pa.array([r[1] for r in part], pa.int64()),
                  "v": [r[2] for r in part]})
        for part in (rows[:2], rows[2:])
    ]  # fmt: skip
    path = tmp_path / "sp"
    write(path, tasks, state="rules", stateType="broadcast", keyColumns="name,n", valueColumns="v")
    desc = MapStateDescriptor("rules", Types.ROW_NAMED(["name", "n"], [Types.STRING(), Types.LONG()]),
                              Types.STRING())  # fmt: skip
    got = dict(open_checkpoint(str(path)).operator_backend("op", 0, 1).get_broadcast_state(desc).items())
    assert got == {("a", 1): "z", ("b", 2): "y", ("a", 2): "ü"}
