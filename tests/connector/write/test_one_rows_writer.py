"""The batch writer and the streaming sink turn a task's rows into state files through one
function of ``checkpoint/`` (:func:`flinkstate.checkpoint.keyed_state_files`): for the same
rows (row values with null fields, null values, unicode keys and user keys) both write the
files that function writes, and commit the same state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flinkstate.checkpoint import DATA_DIR, CheckpointStorage, Storage, keyed_state_files
from flinkstate.connector.options import WriteOptions
from flinkstate.connector.write.batch import BootstrapWriter, TaskFiles
from flinkstate.connector.write.plan import make_plan, state_rows
from flinkstate.connector.write.stream import StateSink

KEYS = ["ключ", "鍵", "🔑", "key", "ключ", "🔑", "é", "e\u0301"]
NAMES = ["a", None, "c", "d", "e", "f", None, "h"]
SCORES = [1.5, 2.0, None, 4.0, 5.5, None, 7.0, 8.0]
P, MAX_P = 3, 16


def _table(kind: str) -> pa.Table:
    columns: dict[str, Any] = {"k": pa.array(KEYS, pa.string())}
    if kind == "map":
        columns["u"] = pa.array(["ü", "ü", "ñ", "ø", "ñ", "∂", "ü", "ü"], pa.string())
    columns["name"] = pa.array(NAMES, pa.string())
    columns["score"] = pa.array(SCORES, pa.float64())
    return pa.table(columns)


def _options(root: Path, kind: str) -> dict[str, str]:
    options = {"path": str(root), "operator": "op", "state": "s", "statetype": kind, "keycolumns": "k",
               "valuecolumns": "name,score", "parallelism": str(P), "maxparallelism": str(MAX_P)}  # fmt: skip
    if kind == "map":
        options["userkeycolumn"] = "u"
    return options


def _struct(table: pa.Table) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(table.schema)


def _rows(path: str) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


def _files(directory: Storage, message: TaskFiles) -> dict[int, list[dict[str, Any]]]:
    return {index: _rows(directory.path(ref.path)) for index, ref in message.files}


def _state(root: Path) -> list[tuple[int, list[dict[str, Any]]]]:
    checkpoint = CheckpointStorage(str(root)).load(None)
    return [
        (kg, [r for t in tables for r in t.to_pylist()]) for kg, tables in checkpoint.read_keyed("op", "s")
    ]


@pytest.mark.parametrize("kind", ["value", "list", "map"])
def test_the_writer_and_the_sink_write_what_the_checkpoint_function_writes(tmp_path: Path, kind: str) -> None:
    table = _table(kind)
    plan = make_plan(WriteOptions.parse(_options(tmp_path, kind)), table.schema)
    assert plan.key_type is not None
    what = "value column name, score"
    direct = keyed_state_files(state_rows(plan, table), plan.meta(), plan.key_type, MAX_P, P, what)
    expected = {index: pq.read_table(pa.BufferReader(f.data)).to_pylist() for index, f in direct.items()}
    assert {r["key"] for rows in expected.values() for r in rows} == set(KEYS)  # unicode keys kept apart
    batch = table.to_batches()[0]

    written = tmp_path / "written"
    writer = BootstrapWriter(_options(written, kind), _struct(table), overwrite=True)
    message = writer.write(iter([batch]))
    assert _files(writer._directory(), message) == expected
    writer.commit([message])

    streamed = tmp_path / "streamed"
    sink = StateSink(_options(streamed, kind), _struct(table))
    sunk = sink.write(iter([batch]))
    assert isinstance(sunk, TaskFiles)
    assert _files(Storage(str(streamed)).child(DATA_DIR), sunk) == expected
    sink.commit([sunk], 0)

    assert _state(written) == _state(streamed)
    assert _state(written)
