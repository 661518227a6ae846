"""Flink operator state with a subtask that holds none (finished, or never registered it):
repartitioned by subtask index over the operator's parallelism, as Flink does."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pyarrow as pa
import pytest

from flinkstate.checkpoint.flink.reader.restore import operator_backend
from flinkstate.checkpoint.flink.streams.header_read import StateInfo
from flinkstate.checkpoint.flink.types.flink_type import FlinkType
from flinkstate.state import ListStateDescriptor, Types

OFFSETS = ListStateDescriptor("offsets", Types.LONG())
HELD = {0: [1, 2, 3], 2: [5]}
EXPECTED = {3: [[1, 2, 3], [], [5]], 2: [[1, 2], [3, 5]], 1: [[1, 2, 3, 5]]}


class _GapOperator:
    """What the savepoint reader gives for an operator at parallelism 3 whose subtask 1 holds
    no operator state (its metadata lists subtasks 0 and 2 only)."""

    directory = "gap"

    def __init__(self) -> None:
        long = FlinkType("LongSerializerSnapshot", Types.LONG(), None)
        self.info = StateInfo(0, "offsets", "SPLIT_DISTRIBUTE", None, long, None, long)

    def operator(self, name: str) -> Any:
        handle = SimpleNamespace(states=(SimpleNamespace(name="offsets"),))
        subtasks = tuple(SimpleNamespace(index=i, managed_operator=handle) for i in HELD)
        return SimpleNamespace(parallelism=3, max_parallelism=128, subtasks=subtasks)

    def operator_infos(self, name: str) -> list[StateInfo]:
        return [self.info]

    def operator_state(self, name: str, state: str) -> pa.Table:
        rows = [(i, p, v) for i, values in HELD.items() for p, v in enumerate(values)]
        subtask, position, value = zip(*rows, strict=True)
        return pa.table(
            {
                "subtask": pa.array(subtask, pa.int32()),
                "position": pa.array(position, pa.int32()),
                "value": pa.array(value, pa.int64()),
            }
        )


@pytest.mark.parametrize("parallelism", sorted(EXPECTED))
def test_missing_subtask_is_an_empty_one(parallelism: int) -> None:
    sp = cast(Any, _GapOperator())
    got = [
        list(operator_backend(sp, "op", i, parallelism).get_list_state(OFFSETS).get())
        for i in range(parallelism)
    ]
    assert got == EXPECTED[parallelism]
