"""One pushdown rule (connector/read/pushdown.py) for our checkpoints and Flink's savepoints: every
accepted filter is applied exactly, so a pushed read equals Spark filtering an unpushed one."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from checkpoint_data import write_values
from flink_model import FIXTURES
from pyspark.sql.datasource import EqualTo, Filter, GreaterThan, In, LessThanOrEqual, StringStartsWith

from flinkstate.connector.read.pushdown import Pushdown, int_predicate
from flinkstate.connector.source import FlinkStateDataSource
from flinkstate.state import Types

FLINK = str(FIXTURES / "heap_canonical_files")


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("rule") / "chk"
    return write_values(str(path), Types.LONG(), {k: -k for k in range(500)}, 3, offsets=True)


def _rows(options: dict[str, str], filters: list[Filter]) -> tuple[list[dict[str, Any]], list[Filter]]:
    source = FlinkStateDataSource(options)
    reader = source.reader(source.schema())
    rejected = list(reader.pushFilters(filters))
    batches = [b for p in reader.partitions() for b in reader.read(p)]
    return (pa.Table.from_batches(batches).to_pylist() if batches else []), rejected


def _spark_filter(rows: list[dict[str, Any]], filters: list[Filter]) -> list[dict[str, Any]]:
    """The filters as Spark applies them to an unpushed read (the model)."""

    def keep(row: dict[str, Any]) -> bool:
        for f in filters:
            value = row[f.attribute[0]]
            predicate = int_predicate(f)
            if predicate is not None and not predicate(value):
                return False
            if isinstance(f, In) and predicate is None and value not in f.value:
                return False
            if isinstance(f, EqualTo) and predicate is None and value != f.value:
                return False
        return True

    return [r for r in rows if keep(r)]


def _key(row: dict[str, Any]) -> str:
    return repr(sorted(row.items()))


KEYED = {"operator": "keyed-states", "state": "v_long"}
CASES = [
    (KEYED, [EqualTo(("key",), 7)]),
    (KEYED, [In(("key",), (1, 2, 3)), GreaterThan(("key_group",), 9)]),
    ({"operator": "keyed-states", "state": "v_string"}, [In(("key",), (4, 5))]),
    ({"operator": "operator-states", "state": "op_union"}, [EqualTo(("subtask",), 1)]),
    ({"operator": "broadcast", "state": "rules"}, [EqualTo(("subtask",), 1)]),
    ({"operator": "broadcast", "state": "rules"}, [LessThanOrEqual(("subtask",), 0)]),
]  # fmt: skip


@pytest.mark.parametrize(("options", "filters"), CASES)
def test_flink_pushed_reads_equal_spark_filtering(options: dict[str, str], filters: list[Filter]) -> None:
    full, _ = _rows({"path": FLINK, **options}, [])
    pushed, rejected = _rows({"path": FLINK, **options}, filters)
    assert rejected == []
    assert sorted(map(_key, pushed)) == sorted(map(_key, _spark_filter(full, filters)))
    assert len(pushed) < len(full)


def test_flink_broadcast_subtasks_option_selects_copies() -> None:
    rows, _ = _rows({"path": FLINK, "operator": "broadcast", "state": "rules", "subtasks": "1"}, [])
    assert rows and {r["subtask"] for r in rows} == {1}


@pytest.mark.parametrize(
    ("state", "filters"),
    [
        ("count", [EqualTo(("key",), 7)]),
        ("count", [In(("key",), (1, 2, 499, 10_000)), LessThanOrEqual(("key_group",), 64)]),
        ("offsets", [In(("subtask",), (0, 2))]),
    ],
)
def test_our_pushed_reads_equal_spark_filtering(ours: str, state: str, filters: list[Filter]) -> None:
    options = {"path": ours, "operator": "op", "state": state}
    full, _ = _rows(options, [])
    pushed, rejected = _rows(options, filters)
    assert rejected == []
    assert sorted(map(_key, pushed)) == sorted(map(_key, _spark_filter(full, filters)))


def test_filters_outside_the_rule_are_left_to_spark() -> None:
    keyed = Pushdown(keyed=True, key_type=Types.STRING())
    other = [
        EqualTo(("key",), 7),  # not the key's type
        In(("key",), ("a", None)),  # a null
        StringStartsWith(("key",), "a"),
        EqualTo(("key_group",), 1.0),  # not an integer
        EqualTo(("subtask",), 1),  # keyed state has no subtask column
        EqualTo(("value",), 1),
        EqualTo(("key", "f0"), 1),  # a nested field
    ]
    assert keyed.push(other) == other
    operator_list = Pushdown(keyed=False, subtasks=True)
    assert operator_list.push([EqualTo(("key_group",), 1), EqualTo(("key",), "a")]) == [
        EqualTo(("key_group",), 1),
        EqualTo(("key",), "a"),
    ]
    assert operator_list.push([GreaterThan(("subtask",), 0)]) == []
    assert not operator_list.subtask_allowed(0) and operator_list.subtask_allowed(1)


def test_selected_keys_keep_distinct_floats() -> None:
    """The ``keys`` option's keys are never merged by a set (0.0 and -0.0 are two keys)."""
    pushdown = Pushdown(keyed=True, key_type=Types.DOUBLE())
    got = pushdown.keys([0.0, -0.0])
    assert got is not None and [str(k) for k in got] == ["0.0", "-0.0"]
