"""Every read returns an empty DataFrame with its view's schema where nothing matches, never an error.

Each case is read twice: as Spark's workers would (schema, reader and read in separate
pickled copies; a reader planning no partition gets Spark's stand-in partition), and, in
one Spark-tier test, through ``spark.read``.
"""

from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa
import pytest
from flink_model import FIXTURES
from pyspark.sql.datasource import InputPartition, LessThan
from pyspark.sql.pandas.types import to_arrow_schema

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.connector.source import FlinkStateDataSource
from flinkstate.state import (
    HeapKeyedStateBackend,
    KeyGroupRange,
    ListStateDescriptor,
    MapStateDescriptor,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.operator import OperatorStateBackend
from flinkstate.state.process.timers import TimeDomain, timer_descriptor

FLINK = str(FIXTURES / "heap_canonical_files")
MAX_P = 16
VALUE = ValueStateDescriptor("value", Types.LONG())
LIST = ListStateDescriptor("list", Types.STRING())
MAP = MapStateDescriptor("map", Types.STRING(), Types.LONG())
GONE = ValueStateDescriptor("gone", Types.LONG())
GONE_LIST = ListStateDescriptor("gone_list", Types.STRING())
GONE_MAP = MapStateDescriptor("gone_map", Types.STRING(), Types.LONG())
KEYS = [3, 5, 8]  # in subtask 0's key groups only (see the fixture)


def _ttl() -> StateTtlConfig:
    from datetime import timedelta

    return StateTtlConfig.new_builder(timedelta(hours=1)).build()


def _subtask(index: int) -> tuple[HeapKeyedStateBackend, OperatorStateBackend]:
    rng = KeyGroupRange(0, 7) if index == 0 else KeyGroupRange(8, 15)
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=MAX_P, key_group_range=rng)
    ttl_map = MapStateDescriptor("gone_ttl_map", Types.STRING(), Types.LONG())
    ttl_map.enable_time_to_live(_ttl())
    gone: list[Any] = [
        backend.get_state(GONE),
        backend.get_list_state(GONE_LIST),
        backend.get_map_state(GONE_MAP),
        backend.get_map_state(ttl_map),
        backend.get_map_state(timer_descriptor(TimeDomain.EVENT_TIME)),
    ]
    for key in range(100):
        if assign_to_key_group(key, MAX_P) not in rng:
            continue
        backend.set_current_key(key)
        if key in KEYS:
            backend.get_state(VALUE).update(key)
            backend.get_list_state(LIST).add_all(["a", "b"])
            backend.get_map_state(MAP).put("x", key)
        gone[0].update(1)
        gone[1].add("x")
        gone[2].put("k", 1)
        gone[3].put("k", 1)
        gone[4].put(1, True)
        for state in gone:
            state.clear()  # registered, then emptied
    ops = OperatorStateBackend()
    ops.get_list_state(ListStateDescriptor("split", Types.LONG()))
    ops.get_union_list_state(ListStateDescriptor("union", Types.STRING()))
    ops.get_broadcast_state(MapStateDescriptor("rules", Types.STRING(), Types.STRING()))
    return backend, ops


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Operator ``op`` at parallelism 2 (max 16) in three checkpoints: the second changes one
    value, the third nothing."""
    path = str(tmp_path_factory.mktemp("empty") / "root")
    storage = CheckpointStorage(path, retain=5, incremental=True)
    backends = [_subtask(0), _subtask(1)]
    for round in range(3):
        if round == 1:
            backends[0][0].set_current_key(KEYS[0])
            backends[0][0].get_state(VALUE).update(-1)
        pending = storage.begin()
        for i, (keyed, ops) in enumerate(backends):
            pending.write_keyed("op", keyed, subtask=i, parallelism=2)
            pending.write_operator("op", ops, subtask=i, parallelism=2, max_parallelism=MAX_P)
        pending.commit()
    return path


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A checkpoint of no operator at all: an empty metadata view."""
    path = str(tmp_path_factory.mktemp("bare") / "root")
    CheckpointStorage(path).begin().commit()
    return path


def _cases(root: str, bare: str) -> dict[str, dict[str, str]]:
    keyed = {"path": root, "operator": "op"}
    empty_group = next(g for g in range(MAX_P) if g not in {assign_to_key_group(k, MAX_P) for k in KEYS})
    feed = {**keyed, "readChangeFeed": "true", "changeStartCheckpointId": "3"}
    cases = {
        "metadata": {"path": bare},
        "timers": {**keyed, "timers": "true"},
        "split": {**keyed, "state": "split"},
        "union": {**keyed, "state": "union"},
        "broadcast": {**keyed, "state": "rules"},
        "keys-none": {**keyed, "state": "value", "keys": "[]"},
        "keys-missing": {**keyed, "state": "value", "keys": "[99999]"},
        "keygroups-empty": {**keyed, "state": "value", "keyGroups": str(empty_group)},
        "keygroups-not-owned": {**keyed, "state": "value", "keyGroups": "0", "subtasks": "1"},
        "feed-unchanged": {**feed, "state": "value"},
        "feed-keys-none": {**feed, "state": "value", "keys": "[]", "changeStartCheckpointId": "2"},
        "feed-keys-other": {**feed, "state": "value", "keys": f"[{KEYS[1]}]", "changeStartCheckpointId": "2"},
        "flink-keys": {"path": FLINK, "operator": "keyed-states", "state": "v_long", "keys": "[]"},
        "flink-keygroups": {
            "path": FLINK, "operator": "keyed-states", "state": "v_long", "keyGroups": "3", "subtasks": "1"
        },  # key group 3 is subtask 0's
        "flink-list-keys": {"path": FLINK, "operator": "keyed-states", "state": "l_long", "keys": "[-1]"},
    }  # fmt: skip
    for name in ("gone", "gone_list", "gone_map", "gone_ttl_map", "list", "map"):
        for flatten in ("true", "false"):
            selection = {} if name.startswith("gone") else {"keys": "[1]"}
            cases[f"{name}-flatten-{flatten}"] = {**keyed, "state": name, "flatten": flatten, **selection}
    return cases


def _as_spark_reads(options: dict[str, str]) -> tuple[pa.Table, pa.Schema]:
    """What Spark does: schema() on one copy of the source, reader() on a pickled copy of it,
    partitions() on the reader, read() of each (or of Spark's stand-in) on pickled copies."""
    source = FlinkStateDataSource({k.lower(): v for k, v in options.items()})
    schema = source.schema()
    source = pickle.loads(pickle.dumps(source))
    reader = source.reader(schema)
    partitions = reader.partitions() or [InputPartition(None)]
    arrow = to_arrow_schema(schema, timezone="UTC")
    batches = [b for p in partitions for b in pickle.loads(pickle.dumps(reader)).read(p)]
    return pa.Table.from_batches(batches, schema=arrow), arrow


def _expected_names(options: dict[str, str]) -> list[str]:
    """The view's columns without the selection: selecting nothing keeps them."""
    wider = {k.lower(): v for k, v in options.items() if k not in ("keys", "keyGroups", "subtasks")}
    return list(FlinkStateDataSource(wider).schema().names)


def test_every_empty_read_returns_no_rows_with_its_schema(root: str, bare: str) -> None:
    for name, options in _cases(root, bare).items():
        table, schema = _as_spark_reads(options)
        assert table.num_rows == 0, name
        assert table.schema == schema and schema.names == _expected_names(options), name


def test_schema_of_emptied_states_keeps_flatten(root: str, bare: str) -> None:
    cases = _cases(root, bare)
    flat = _as_spark_reads(cases["gone_list-flatten-true"])[1]
    nested = _as_spark_reads(cases["gone_list-flatten-false"])[1]
    assert "position" in flat.names and pa.types.is_string(flat.field("value").type)
    assert "position" not in nested.names and pa.types.is_list(nested.field("value").type)
    ttl = _as_spark_reads(cases["gone_ttl_map-flatten-false"])[1]
    assert pa.types.is_map(ttl.field("value").type) and pa.types.is_map(ttl.field("ttl_timestamp").type)


def test_pushed_filters_that_select_nothing(root: str) -> None:
    """A pushed key-group or subtask filter that excludes everything plans no partition."""
    for options, column in (
        ({"state": "value"}, "key_group"),
        ({"state": "split"}, "subtask"),
    ):
        source = FlinkStateDataSource({"path": root, "operator": "op", **options})
        reader = source.reader(source.schema())
        assert list(reader.pushFilters([LessThan((column,), 0)])) == []
        assert reader.partitions() == []
        assert list(reader.read(InputPartition(None))) == []


def test_a_partition_of_another_reader_is_refused(root: str) -> None:
    source = FlinkStateDataSource({"path": root, "operator": "op", "state": "value"})
    reader = source.reader(source.schema())
    with pytest.raises(TypeError, match="not a partition of this reader"):
        list(reader.read(InputPartition(7)))


@pytest.mark.spark
def test_spark_reads_every_empty_view(spark: Any, root: str, bare: str) -> None:
    for name, options in _cases(root, bare).items():
        reader = spark.read.format("flinkstate")
        for key, value in options.items():
            reader = reader.option(key, value)
        df = reader.load()
        assert df.collect() == [], name
        assert df.columns == _expected_names(options), name
