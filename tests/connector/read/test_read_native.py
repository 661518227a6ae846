"""The Spark reader on native RocksDB checkpoints reads the rows it reads from the Parquet
checkpoint of the same backends (TTL-expired entries left out as there, filters applied);
a Spark write into a native operator is refused with a typed error."""

from __future__ import annotations

import datetime
import json
import math
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from flinkstate.checkpoint import CheckpointError, CheckpointStorage
from flinkstate.connector.source import FlinkStateDataSource
from flinkstate.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    RocksDBKeyedStateBackend,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.ttl import ManualTimeProvider

VALUE = ValueStateDescriptor("v", Types.DOUBLE())
ITEMS = ListStateDescriptor("items", Types.STRING())
TAGS = MapStateDescriptor("tags", Types.STRING(), Types.LONG())
SEEN = ValueStateDescriptor("seen", Types.STRING())
SEEN.enable_time_to_live(StateTtlConfig.new_builder(datetime.timedelta(hours=1)).build())
NOW = int(time.time() * 1000)  # reads judge processing-time TTL by the wall clock
CLOCK = ManualTimeProvider(NOW)
P = 2


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(Parquet root, native root) of the same two RocksDB backends, checkpointed twice."""
    tmp = tmp_path_factory.mktemp("native-read")
    parquet = CheckpointStorage(str(tmp / "parquet"))
    native = CheckpointStorage(str(tmp / "native"), rocksdb_format="native")
    backends = [
        RocksDBKeyedStateBackend(
            tmp / f"db-{i}-{uuid.uuid4().hex[:6]}",
            Types.STRING(),
            128,
            compute_key_group_range_for_operator_index(128, P, i),
            CLOCK,
        )
        for i in range(P)
    ]
    try:
        for version in (1, 2):
            for n in range(400):
                key = f"ключ-{n}"
                b = next(b for b in backends if _group(key) in b.key_group_range)
                b.set_current_key(key)
                CLOCK.now = NOW - (0 if n % 2 else 7_200_000)  # odd keys' TTL entries stay alive
                b.get_state(VALUE).update([math.nan, -0.0, n / 3][n % 3] if version == 1 else float(n))
                b.get_list_state(ITEMS).add(f"é{version}-{n}")
                b.get_partitioned_state(("ns", n % 3), TAGS).put_all(
                    {f"t{n % 5}": None if n % 7 else n, "x": version}
                )
                b.get_state(SEEN).update(f"s{n}")
            CLOCK.now = NOW
            for storage in (parquet, native):
                pending = storage.begin()
                for i, b in enumerate(backends):
                    pending.write_subtask("op", i, P, 128, keyed=b)
                pending.commit()
    finally:
        for b in backends:
            b.close()
    return str(tmp / "parquet"), str(tmp / "native")


def _group(key: str) -> int:
    from flinkstate.state import assign_to_key_group

    return assign_to_key_group(key, 128, Types.STRING())


def read(path: str, **options: str) -> list[str]:
    """The rows of a read, driven as Spark's tasks drive it, sorted (as JSON, NaN spelled out)."""
    opts = {k.lower(): v for k, v in {"path": path, "operator": "op", **options}.items()}
    source = FlinkStateDataSource(opts)
    schema = source.schema()
    reader = source.reader(schema)
    batches = [b for p in reader.partitions() for b in reader.read(p)]
    rows = pa.Table.from_batches(batches, schema=to_arrow_schema(schema, timezone="UTC")).to_pylist()
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


@pytest.mark.parametrize(
    "options",
    [
        {"state": "v"},
        {"state": "items"},
        {"state": "tags"},
        {"state": "tags", "flatten": "false"},
        {"state": "seen"},
        {"state": "seen", "includeExpired": "true"},
        {"state": "v", "checkpointId": "1"},
        {"state": "items", "keys": '["ключ-7", "ключ-300"]'},
        {"state": "tags", "keyGroups": "3,40-90"},
    ],
)
def test_rows_are_the_parquet_checkpoints(roots: tuple[str, str], options: dict[str, str]) -> None:
    parquet, native = roots
    want = read(parquet, **options)
    assert want and read(native, **options) == want


def test_expired_entries_are_left_out(roots: tuple[str, str]) -> None:
    _, native = roots
    assert len(read(native, state="seen")) == 200 < len(read(native, state="seen", includeExpired="true"))


def test_spark_reads_a_native_checkpoint(spark: Any, roots: tuple[str, str]) -> None:
    parquet, native = roots

    def rows(path: str) -> list[Any]:
        df = spark.read.format("flinkstate").option("operator", "op").option("state", "tags").load(path)
        return sorted(map(tuple, df.collect()), key=repr)

    assert rows(native) == rows(parquet) != []


def test_a_write_into_a_native_operator_is_refused(roots: tuple[str, str]) -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from flinkstate.connector.write.batch import BootstrapWriter

    _, native = roots
    schema = StructType([StructField("k", StringType()), StructField("v", LongType())])
    opts = {"path": native, "operator": "op", "state": "extra", "statetype": "value", "keycolumns": "k",
            "valuecolumns": "v", "parallelism": str(P), "maxparallelism": "128"}  # fmt: skip
    writer = BootstrapWriter(opts, schema, False)
    rows = pa.record_batch([pa.array(["ключ-1"]), pa.array([7])], names=["k", "v"])
    with pytest.raises(CheckpointError, match=r"\[NATIVE_FORMAT_UNSUPPORTED\].*'op'"):
        writer.commit([writer.write(iter([rows]))])
    assert CheckpointStorage(native).completed_ids() == [1, 2]
