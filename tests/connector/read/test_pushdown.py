"""Filter pushdown, proven by the partitions planned and the files and bytes read.

The reader is built and driven directly (no SparkSession), as Spark's workers would.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from checkpoint_data import write_values
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan

from flinkstate.checkpoint import CheckpointStorage, Storage
from flinkstate.connector.options import ReadOptions
from flinkstate.connector.read.checkpoint_reader import FlinkStateReader, view_schema_of
from flinkstate.connector.source import plan_read
from flinkstate.state import (
    HeapKeyedStateBackend,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("pushdown") / "chk"
    return write_values(str(path), Types.LONG(), {k: k * 2 for k in range(20_000)}, 3, offsets=True)


def _reader(root: str, state: str) -> FlinkStateReader:
    options = ReadOptions.parse(
        {"path": root, "operator": "op", "state": state, "keygroupsperpartition": "8"}
    )
    checkpoint = plan_read(options).source
    return FlinkStateReader(options, checkpoint, view_schema_of(options, checkpoint))


def _read_all(reader: FlinkStateReader, storage: Storage) -> pa.Table:
    batches = [b for p in reader.partitions() for b in reader.read_from(storage, p)]
    return pa.Table.from_batches(batches, schema=reader.arrow_schema)


def test_key_equality_reads_one_key_group(root: str) -> None:
    full = _reader(root, "count")
    full_storage = Storage(full.directory_url)
    assert _read_all(full, full_storage).num_rows == 20_000

    reader = _reader(root, "count")
    assert list(reader.pushFilters([EqualTo(("key",), 4242)])) == []
    parts = reader.partitions()
    assert len(parts) == 1 and len(parts[0].files) == 1  # type: ignore[attr-defined]
    assert [kg for kg, _ in parts[0].files[0][1]] == [assign_to_key_group(4242, 128)]  # type: ignore[attr-defined]
    storage = Storage(reader.directory_url)
    table = _read_all(reader, storage)
    assert table.to_pylist() == [
        {"key_group": assign_to_key_group(4242, 128), "key": 4242, "namespace": None, "value": 8484}
    ]
    assert storage.files_opened == 1 and full_storage.files_opened >= 3
    assert storage.bytes_read * 20 < full_storage.bytes_read


def test_key_in_list_and_key_group_ranges(root: str) -> None:
    reader = _reader(root, "count")
    wanted = [1, 2, 3, 99_999]
    assert list(reader.pushFilters([In(("key",), tuple(wanted))])) == []
    groups = {kg for p in reader.partitions() for f in p.files for kg, _ in f[1]}  # type: ignore[attr-defined]
    assert groups == {assign_to_key_group(k, 128) for k in wanted}
    assert sorted(_read_all(reader, Storage(reader.directory_url)).column("key").to_pylist()) == [1, 2, 3]

    ranged = _reader(root, "count")
    filters = [GreaterThanOrEqual(("key_group",), 10), LessThan(("key_group",), 20)]
    assert list(ranged.pushFilters(filters)) == []
    got = set(_read_all(ranged, Storage(ranged.directory_url)).column("key_group").to_pylist())
    assert got == set(range(10, 20))


def test_other_filters_are_left_to_spark(root: str) -> None:
    reader = _reader(root, "count")
    value_filter = EqualTo(("value",), 4)
    wrong_type = EqualTo(("key",), "4")
    assert list(reader.pushFilters([value_filter, wrong_type])) == [value_filter, wrong_type]
    assert len(reader.partitions()) > 3


def test_subtask_filter_on_operator_state(root: str) -> None:
    reader = _reader(root, "offsets")
    assert list(reader.pushFilters([EqualTo(("subtask",), 1)])) == []
    parts = reader.partitions()
    assert [p.subtask for p in parts] == [1]  # type: ignore[attr-defined]
    assert _read_all(reader, Storage(reader.directory_url)).column("value").to_pylist() == [1, 11]


def test_reader_and_partitions_pickle(root: str) -> None:
    import pickle

    reader = _reader(root, "count")
    list(reader.pushFilters([EqualTo(("key",), 5)]))
    clone: Any = pickle.loads(pickle.dumps(reader))
    parts = [pickle.loads(pickle.dumps(p)) for p in clone.partitions()]
    rows = [b for p in parts for b in clone.read(p)]
    assert sum(b.num_rows for b in rows) == 1


def test_guard_sees_no_pushfilters_override(root: str, tmp_path: Path) -> None:
    """Spark refuses readers that override pushFilters when pushdown is off; ours passes its check."""
    from pyspark.sql.datasource import DataSourceReader

    reader = _reader(root, "count")
    assert getattr(reader.pushFilters, "__func__", None) is DataSourceReader.pushFilters


def test_user_schema_decodes_only_its_columns(root: str, tmp_path: Path) -> None:
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    entries = backend.get_map_state(MapStateDescriptor("m", Types.STRING(), Types.STRING()))
    for k in range(2_000):
        backend.set_current_key(k)
        entries.put_all({f"entry {i}": hashlib.sha512(b"%d,%d" % (k, i)).hexdigest() for i in range(10)})
    pending = CheckpointStorage(str(tmp_path / "map")).begin()
    pending.write_keyed("op", backend)
    pending.commit()
    options = ReadOptions.parse(
        {"path": str(tmp_path / "map"), "operator": "op", "state": "m", "keygroupsperpartition": "8"}
    )
    checkpoint = plan_read(options).source
    narrow = pa.schema([pa.field("key", pa.int64())])
    reader = FlinkStateReader(options, checkpoint, narrow)
    partition = reader.partitions()[0]
    assert reader._needed_columns(None) == {"key_group", "key"}
    wide_storage, narrow_storage = Storage(reader.directory_url), Storage(reader.directory_url)
    full = FlinkStateReader(options, checkpoint, view_schema_of(options, checkpoint))
    list(full.read_from(wide_storage, partition))
    batches = list(reader.read_from(narrow_storage, partition))
    assert batches and batches[0].schema.names == ["key"]
    assert narrow_storage.bytes_read * 2 < wide_storage.bytes_read


def test_value_state_user_schema_reads_the_value(root: str) -> None:
    """A null value stores nothing, so whether a row is shown depends on its value."""
    options = ReadOptions.parse({"path": root, "operator": "op", "state": "count"})
    checkpoint = plan_read(options).source
    reader = FlinkStateReader(options, checkpoint, pa.schema([pa.field("key", pa.int64())]))
    assert reader._needed_columns(None) == {"key_group", "key", "value"}


@pytest.mark.parametrize("damage", ["altered page", "truncated"])
def test_damaged_data_file_is_a_corrupt_error_naming_it(root: str, tmp_path: Path, damage: str) -> None:
    """Page checksums catch altered data; the manifest's size catches truncation."""
    import shutil

    from flinkstate.checkpoint import CheckpointCorruptError

    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    reader = _reader(str(copy), "count")
    partition = reader.partitions()[0]
    path = partition.files[0][0].path  # type: ignore[attr-defined]
    target = next(copy.rglob(Path(path).name))
    data = bytearray(target.read_bytes())
    if damage == "altered page":
        data[200] ^= 0xFF
    else:
        del data[-100:]
    target.write_bytes(bytes(data))
    with pytest.raises(CheckpointCorruptError, match=r"\[CHECKPOINT_CORRUPT\].*" + Path(path).name):
        list(reader.read(partition))


@pytest.mark.parametrize("per_partition", ["8", "128"], ids=["range-read", "whole-file"])
@pytest.mark.parametrize("damage", ["altered footer", "altered page", "truncated"])
def test_every_read_path_checks_files_against_the_manifest(
    root: str, tmp_path: Path, damage: str, per_partition: str
) -> None:
    """An altered footer byte that changes no data (the writer's name) is caught too."""
    import shutil

    from flinkstate.checkpoint import CheckpointCorruptError

    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    options = {"path": str(copy), "operator": "op", "state": "count", "keygroupsperpartition": per_partition}
    parsed = ReadOptions.parse(options)
    checkpoint = plan_read(parsed).source
    reader = FlinkStateReader(parsed, checkpoint, view_schema_of(parsed, checkpoint))
    partition = reader.partitions()[0]
    ref, groups = partition.files[0]  # type: ignore[attr-defined]
    assert (len(groups) == len(ref.key_groups)) == (per_partition == "128")
    target = next(copy.rglob(Path(ref.path).name))
    data = bytearray(target.read_bytes())
    if damage == "altered footer":
        at = data.rindex(b"parquet-cpp")
        data[at] = ord("P")
    elif damage == "altered page":
        data[200] ^= 0xFF
    else:
        del data[-100:]
    target.write_bytes(bytes(data))
    with pytest.raises(CheckpointCorruptError, match=r"\[CHECKPOINT_CORRUPT\].*" + Path(ref.path).name):
        list(reader.read(partition))


@pytest.fixture(scope="module")
def float_roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """DOUBLE and FLOAT keys 0.0, -0.0 (distinct keys in Flink), NaN and 1.5, at parallelism 2."""
    roots = {}
    for name, key_type in (("double", Types.DOUBLE()), ("float", Types.FLOAT())):
        path = str(tmp_path_factory.mktemp("floats") / name)
        pending = CheckpointStorage(path).begin()
        for i in range(2):
            rng = compute_key_group_range_for_operator_index(128, 2, i)
            backend = HeapKeyedStateBackend(key_type=key_type, key_group_range=rng)
            state = backend.get_state(ValueStateDescriptor("v", Types.LONG()))
            for key, value in ((0.0, 1), (-0.0, 2), (math.nan, 3), (1.5, 4)):
                if assign_to_key_group(key, 128, key_type) in rng:
                    backend.set_current_key(key)
                    state.update(value)
            pending.write_keyed("op", backend, i, 2)
        pending.commit()
        roots[name] = path
    return roots


@pytest.mark.parametrize("key_type", ["double", "float"])
@pytest.mark.parametrize(
    "condition",
    ["key = 0.0", "key = -0.0", "key = double('NaN')", "key IN (0.0, 1.5)", "key IN (-0.0, double('NaN'))",
     "key = cast(0.0 as float)", "key IN (cast('NaN' as float), cast(-0.0 as float))"],
)  # fmt: skip
def test_float_key_filters_match_spark_without_pushdown(
    spark: Any, float_roots: dict[str, str], key_type: str, condition: str
) -> None:
    """Spark's = takes 0.0 = -0.0 and NaN = NaN: a pushed filter must give what Spark's own gives."""
    from flinkstate.connector import PUSHDOWN_CONF

    def rows() -> list[tuple[str, int]]:
        df = spark.read.format("flinkstate").option("operator", "op").option("state", "v")
        return sorted(
            (repr(r.key), r.value) for r in df.load(float_roots[key_type]).filter(condition).collect()
        )

    spark.conf.set(PUSHDOWN_CONF, "false")
    without = rows()
    spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        assert rows() == without
    finally:
        spark.conf.set(PUSHDOWN_CONF, "false")
    assert without  # every condition matches a key
