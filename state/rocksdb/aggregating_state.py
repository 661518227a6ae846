"""RocksDB AggregatingState: the entry is the accumulator; ``add(None)`` clears."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..interfaces import AggregatingState
from .base import AbstractRocksDBState
from .column import StateColumn


class RocksDBAggregatingState(AbstractRocksDBState, AggregatingState[Any, Any]):
    __slots__ = ("_agg",)

    def __init__(self, column: StateColumn, ctx: Any, closed: Callable[[], bool], agg_function: Any) -> None:
        super().__init__(column, ctx, closed)
        self._agg = agg_function

    def get(self) -> Any:
        data = self._get(self._prefix())
        return None if data is None else self._agg.get_result(self._col.values.loads(data))

    def add(self, value: Any) -> None:
        prefix = self._prefix()
        if value is None:
            self._delete(prefix)
            return
        data = self._get(prefix)
        values = self._col.values
        acc = self._agg.create_accumulator() if data is None else values.loads(data)
        self._put(prefix, values.dumps(self._agg.add(value, acc)))

    def _merge(self, a: Any, b: Any) -> Any:
        return self._agg.merge(a, b)
