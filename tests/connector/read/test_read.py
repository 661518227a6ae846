"""Reading checkpoints written by the state engine: the metadata view and every state view."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.state import (
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.operator import OperatorStateBackend
from flinkstate.state.ttl import ManualTimeProvider

from state_functions import Average

NOW = int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)


def _ttl(desc: Any, ms: int) -> Any:
    desc.enable_time_to_live(StateTtlConfig.new_builder(datetime.timedelta(milliseconds=ms)).build())
    return desc


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("read") / "chk"
    clock = ManualTimeProvider(NOW)
    b = HeapKeyedStateBackend(key_type=Types.STRING(), time_provider=clock)
    value = b.get_state(
        ValueStateDescriptor("value", Types.ROW_NAMED(["n", "tag"], [Types.LONG(), Types.STRING()]))
    )
    lst = b.get_list_state(ListStateDescriptor("list", Types.LONG()))
    mp = b.get_map_state(MapStateDescriptor("map", Types.STRING(), Types.DOUBLE()))
    red = b.get_reducing_state(ReducingStateDescriptor("sum", lambda a, c: a + c, Types.LONG()))
    agg = b.get_aggregating_state(AggregatingStateDescriptor("avg", Average(), Types.LIST(Types.LONG())))
    fresh = b.get_state(_ttl(ValueStateDescriptor("ttl", Types.LONG()), 3_600_000))
    stale = b.get_state(_ttl(ValueStateDescriptor("stale", Types.LONG()), 1))
    for i in range(200):
        b.set_current_key(f"u{i}")
        value.update((i, None if i % 2 else "even"))
        lst.add_all([i, i + 1, i + 2])
        mp.put_all({"a": i / 2, "b": -1.0})
        red.add(i)
        red.add(1)
        agg.add(i)
        fresh.update(i)
        stale.update(i)
        b.get_partitioned_state(i % 3, ValueStateDescriptor("windows", Types.LONG())).update(i)
    ops = OperatorStateBackend()
    ops.get_list_state(ListStateDescriptor("offsets", Types.LONG())).add_all([10, 20, 30])
    ops.get_union_list_state(ListStateDescriptor("sources", Types.STRING())).add_all(["x", "y"])
    ops.get_broadcast_state(MapStateDescriptor("rules", Types.STRING(), Types.STRING())).put_all({"r1": "on"})
    pending = CheckpointStorage(str(root)).begin()
    pending.write_keyed("op", b)
    pending.write_operator("op", ops)
    pending.commit()
    return str(root)


def _load(spark: Any, path: str, **options: Any) -> Any:
    reader = spark.read.format("flinkstate")
    for k, v in options.items():
        reader = reader.option(k, str(v).lower() if isinstance(v, bool) else v)
    return reader.load(path)


@pytest.mark.connect
def test_metadata_view(spark: Any, checkpoint: str) -> None:
    rows = {r.state: r for r in _load(spark, checkpoint).collect()}
    assert set(rows) == {
        "value",
        "list",
        "map",
        "sum",
        "avg",
        "ttl",
        "stale",
        "windows",
        "offsets",
        "sources",
        "rules",
    }
    assert rows["list"].kind == "list" and rows["list"].key_type == "STRING" and rows["list"].rows == 200
    assert (
        rows["map"].user_key_type == "STRING"
        and rows["map"].value_type == "DOUBLE"
        and rows["map"].rows == 400
    )
    assert rows["windows"].namespace_type == "LONG"
    assert rows["offsets"].kind == "split list" and rows["sources"].kind == "union list"
    assert rows["rules"].kind == "broadcast"
    assert rows["ttl"].ttl.startswith("3600000 ms")
    assert all(r.operator == "op" and r.max_parallelism == 128 and r.bytes > 0 for r in rows.values())


@pytest.mark.connect
def test_value_view_keeps_structs(spark: Any, checkpoint: str) -> None:
    df = _load(spark, checkpoint, operator="op", state="value")
    assert df.columns == ["key_group", "key", "namespace", "value"]
    got = {r.key: (r.value.n, r.value.tag) for r in df.collect()}
    assert len(got) == 200 and got["u4"] == (4, "even") and got["u5"] == (5, None)
    from flinkstate.state import assign_to_key_group

    assert all(r.key_group == assign_to_key_group(r.key, 128) for r in df.collect())


@pytest.mark.connect
def test_list_view(spark: Any, checkpoint: str) -> None:
    flat = (
        _load(spark, checkpoint, operator="op", state="list")
        .filter("key = 'u7'")
        .orderBy("position")
        .collect()
    )
    assert [(r.position, r.value) for r in flat] == [(0, 7), (1, 8), (2, 9)]
    nested = (
        _load(spark, checkpoint, operator="op", state="list", flatten=False).filter("key = 'u7'").collect()
    )
    assert [r.value for r in nested] == [[7, 8, 9]]


@pytest.mark.connect
def test_map_view(spark: Any, checkpoint: str) -> None:
    flat = _load(spark, checkpoint, operator="op", state="map").filter("key = 'u3'").collect()
    assert sorted((r.user_key, r.value) for r in flat) == [("a", 1.5), ("b", -1.0)]
    nested = (
        _load(spark, checkpoint, operator="op", state="map", flatten=False).filter("key = 'u3'").collect()
    )
    assert [r.value for r in nested] == [{"a": 1.5, "b": -1.0}]


def test_reducing_and_aggregating_views(spark: Any, checkpoint: str) -> None:
    assert _load(spark, checkpoint, operator="op", state="sum").filter("key = 'u9'").collect()[0].value == 10
    assert _load(spark, checkpoint, operator="op", state="avg").filter("key = 'u9'").collect()[0].value == [
        9,
        1,
    ]


def test_namespaces(spark: Any, checkpoint: str) -> None:
    df = _load(spark, checkpoint, operator="op", state="windows")
    assert sorted((r.key, r.namespace, r.value) for r in df.filter("key = 'u4'").collect()) == [("u4", 1, 4)]
    assert df.filter("namespace = 2").count() == len([i for i in range(200) if i % 3 == 2])


def test_ttl_views_hide_expired(spark: Any, checkpoint: str) -> None:
    fresh = _load(spark, checkpoint, operator="op", state="ttl")
    assert fresh.count() == 200
    row = fresh.filter("key = 'u1'").collect()[0]
    assert abs(row.ttl_timestamp.timestamp() * 1000 - NOW) < 1
    assert _load(spark, checkpoint, operator="op", state="stale").count() == 0
    assert _load(spark, checkpoint, operator="op", state="stale", includeExpired=True).count() == 200


def test_operator_views(spark: Any, checkpoint: str) -> None:
    split = _load(spark, checkpoint, operator="op", state="offsets").collect()
    assert [(r.subtask, r.position, r.value) for r in split] == [(0, 0, 10), (0, 1, 20), (0, 2, 30)]
    assert sorted(r.value for r in _load(spark, checkpoint, operator="op", state="sources").collect()) == [
        "x",
        "y",
    ]
    assert [(r.key, r.value) for r in _load(spark, checkpoint, operator="op", state="rules").collect()] == [
        ("r1", "on")
    ]


def test_user_schema_selects_columns(spark: Any, checkpoint: str) -> None:
    df = spark.read.format("flinkstate").schema("key string, value bigint").option("operator", "op")
    rows = df.option("state", "sum").load(checkpoint).collect()
    assert len(rows) == 200 and rows[0].__fields__ == ["key", "value"]
    with pytest.raises(Exception, match="does not have"):
        spark.read.format("flinkstate").schema("nope string").option("operator", "op").option(
            "state", "sum"
        ).load(checkpoint).collect()


def test_reads_work_with_pushdown_off(spark: Any, checkpoint: str) -> None:
    from flinkstate.connector import PUSHDOWN_CONF

    assert spark.conf.get(PUSHDOWN_CONF) == "false"  # register(spark)'s default: safe
    rows = _load(spark, checkpoint, operator="op", state="list").filter("key = 'u7'").collect()
    assert sorted(r.value for r in rows) == [7, 8, 9]


@pytest.mark.connect
def test_pushed_filters_then_a_fresh_load(pushdown: Any, checkpoint: str) -> None:
    """With pushdown on, each query on a freshly loaded DataFrame reads what it asks for."""
    spark = pushdown
    one = _load(spark, checkpoint, operator="op", state="sum").filter("key = 'u7'").collect()
    assert [(r.key, r.value) for r in one] == [("u7", 8)]
    assert _load(spark, checkpoint, operator="op", state="sum").count() == 200


@pytest.mark.xfail(
    strict=True,
    reason="Spark 4.3 keeps the read planned for a pushed filter on the loaded relation and "
    "reuses it for later scans of that DataFrame without filters (fixed upstream by keeping "
    "it per scan); when this passes, the warning in docs/spark/read.md can go",
)
def test_dataframe_reused_unfiltered_after_a_pushed_filter(pushdown: Any, checkpoint: str) -> None:
    df = _load(pushdown, checkpoint, operator="op", state="sum")
    assert df.filter("key = 'u7'").count() == 1
    assert df.count() == 200


def test_checkpoint_id_option(spark: Any, checkpoint: str, tmp_path: Path) -> None:
    assert _load(spark, checkpoint, checkpointId=1).count() == 11
    assert _load(spark, str(Path(checkpoint) / "chk-1")).count() == 11


@pytest.mark.connect
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"operatr": "op"}, r"unknown read option.*operatr.*valid options"),
        ({"operator": "nope", "state": "x"}, r"no operator 'nope'.*\['op'\]"),
        ({"operator": "op", "state": "nope"}, r"no state 'nope'.*'avg'"),
        ({"operator": "op"}, r"operator and state go together"),
        ({"flatten": "maybe"}, r"flatten must be true or false"),
    ],
)
def test_errors_name_what_to_fix(spark: Any, checkpoint: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(Exception, match=message):
        _load(spark, checkpoint, **options).collect()


@pytest.mark.connect
def test_the_error_code_reaches_the_client(spark: Any, checkpoint: str, tmp_path: Path) -> None:
    """A data source's error crosses to the client as text (over Spark Connect, gRPC): with its [CODE]."""
    with pytest.raises(Exception, match=r"\[INVALID_OPTION\] unknown read option"):
        _load(spark, checkpoint, operatr="op").collect()
    df = spark.createDataFrame([(1, 1)], "k long, v long")
    writer = df.write.format("flinkstate").mode("overwrite").options(operator="op", state="s", colour="x")
    with pytest.raises(Exception, match=r"\[INVALID_OPTION\] unknown write option"):
        writer.option("stateType", "value").option("keyColumns", "k").save(str(tmp_path / "w"))


@pytest.mark.connect
def test_missing_checkpoint_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"CHECKPOINT_NOT_FOUND"):
        _load(spark, str(tmp_path / "empty")).collect()


@pytest.mark.connect
def test_register_leaves_pushdown_off_and_warns_once_when_asked(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import flinkstate.connector as connector

    monkeypatch.setattr(connector, "_warned", False)
    with pytest.warns(connector.PushdownReuseWarning, match="load once per query"):
        connector.register(spark, filter_pushdown=True)
    assert spark.conf.get(connector.PUSHDOWN_CONF) == "true"
    connector.register(spark, filter_pushdown=True)  # once: no second warning (warnings are errors here)
    connector.register(spark)
    assert spark.conf.get(connector.PUSHDOWN_CONF) == "false"
