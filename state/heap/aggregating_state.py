"""Heap AggregatingState: the stored value is the accumulator; ``add(None)`` clears."""

from __future__ import annotations

from typing import Any

from ..interfaces import AggregatingState
from .base import AbstractHeapState
from .state_table import StateTable


class HeapAggregatingState(AbstractHeapState, AggregatingState[Any, Any]):
    __slots__ = ("_agg",)

    def __init__(self, table: StateTable, ctx: Any, agg_function: Any) -> None:
        super().__init__(table, ctx)
        self._agg = agg_function

    def get(self) -> Any:
        ctx = self._ctx
        acc = self._maps[ctx.kgi].get(ctx.key, self._ns)
        return None if acc is None else self._agg.get_result(acc)

    def add(self, value: Any) -> None:
        ctx = self._ctx
        state_map = self._maps[ctx.kgi]
        if value is None:
            state_map.remove(ctx.key, self._ns)
            self._changed(None)
            return
        acc = state_map.get(ctx.key, self._ns)
        if acc is None:
            acc = self._agg.create_accumulator()
        acc = self._agg.add(value, acc)
        state_map.put(ctx.key, self._ns, acc)
        self._changed(acc)

    def _merge(self, a: Any, b: Any) -> Any:
        return self._agg.merge(a, b)
