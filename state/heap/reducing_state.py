"""Heap ReducingState: added values are reduced into one; ``add(None)`` clears."""

from __future__ import annotations

from typing import Any

from ..interfaces import ReducingState
from .base import AbstractHeapState
from .state_table import StateTable


class HeapReducingState(AbstractHeapState, ReducingState[Any]):
    __slots__ = ("_reduce",)

    def __init__(self, table: StateTable, ctx: Any, reduce: Any) -> None:
        super().__init__(table, ctx)
        self._reduce = reduce

    def get(self) -> Any:
        ctx = self._ctx
        return self._maps[ctx.kgi].get(ctx.key, self._ns)

    def add(self, value: Any) -> None:
        ctx = self._ctx
        state_map = self._maps[ctx.kgi]
        if value is None:
            state_map.remove(ctx.key, self._ns)
            self._changed(None)
            return
        current = state_map.get(ctx.key, self._ns)
        result = value if current is None else self._reduce(current, value)
        if result is None:  # a TTL reduce of expired values leaves nothing
            state_map.remove(ctx.key, self._ns)
        else:
            state_map.put(ctx.key, self._ns, result)
        self._changed(result)

    def _merge(self, a: Any, b: Any) -> Any:
        return self._reduce(a, b)
