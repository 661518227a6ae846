"""RocksDB ReducingState: added values are reduced into one entry; ``add(None)`` clears."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..interfaces import ReducingState
from .base import AbstractRocksDBState
from .column import StateColumn


class RocksDBReducingState(AbstractRocksDBState, ReducingState[Any]):
    __slots__ = ("_reduce",)

    def __init__(self, column: StateColumn, ctx: Any, closed: Callable[[], bool], reduce: Any) -> None:
        super().__init__(column, ctx, closed)
        self._reduce = reduce

    def get(self) -> Any:
        data = self._get(self._prefix())
        return None if data is None else self._col.values.loads(data)

    def add(self, value: Any) -> None:
        prefix = self._prefix()
        if value is None:
            self._delete(prefix)
            return
        data = self._get(prefix)
        values = self._col.values
        result = value if data is None else self._reduce(values.loads(data), value)
        if result is None:  # a TTL reduce of expired values leaves nothing
            self._delete(prefix)
        else:
            self._put(prefix, values.dumps(result))

    def _merge(self, a: Any, b: Any) -> Any:
        return self._reduce(a, b)
