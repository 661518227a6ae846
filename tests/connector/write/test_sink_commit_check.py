"""The Spark batch writer and the streaming sink publish through the commit check: a file a
task reported that the committer cannot see is ``[COMMIT_FILES_MISSING]``, nothing is
published, the other files of the attempt are deleted. Driven without a session (the writer
objects are what Spark's Python workers run), on every storage."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from support.storages import fs_options

from flinkstate.checkpoint import CheckpointStorage, CommitFilesMissingError, Storage
from flinkstate.connector.write.batch import BootstrapWriter
from flinkstate.connector.write.stream import StateSink

OPTIONS = {"operator": "op", "state": "n", "statetype": "value", "keycolumns": "k", "valuecolumns": "v"}


def _schema() -> Any:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType([StructField("k", StringType()), StructField("v", LongType())])


def _batch(n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"k": [f"k{i}" for i in range(n)], "v": list(range(n))})


@pytest.mark.parametrize("kind", ["batch", "stream"])
def test_a_reported_file_the_committer_cannot_see_publishes_nothing(
    location: tuple[str, dict[str, Any]], kind: str
) -> None:
    path, storage = location
    options = {**OPTIONS, "path": path, "parallelism": "4", **fs_options(storage)}
    writer: Any = (
        BootstrapWriter(options, _schema(), overwrite=False)
        if kind == "batch"
        else StateSink(options, _schema())
    )
    done = []
    if kind == "stream":  # a first batch, so the next one's files are kept as they are (not compacted)
        writer.commit([writer.write(iter([_batch(2000)]))], 0)
        done = [1]
    where = Storage(path, storage).child(writer.append.directory if kind == "batch" else "_data")
    message = writer.write(iter([_batch(40)]))
    assert len(message.files) > 1
    where.delete(message.files[0][1].path)  # as if written on a host the driver does not see
    with pytest.raises(CommitFilesMissingError, match=r"\[COMMIT_FILES_MISSING\]"):
        writer.commit([message]) if kind == "batch" else writer.commit([message], 1)
    assert CheckpointStorage(path, storage).completed_ids() == done
    assert not [ref.path for _, ref in message.files if where.exists(ref.path)]  # the others are deleted
