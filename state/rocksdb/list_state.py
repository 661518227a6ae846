"""RocksDB ListState: one entry per element, so ``add`` writes one entry and reads none.

``None`` elements are refused; an empty list reads as empty and is not stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..interfaces import ListState
from ..validation import check_element, checked_elements
from .base import AbstractRocksDBState


class RocksDBListState(AbstractRocksDBState, ListState[Any]):
    __slots__ = ()

    def get(self) -> Iterable[Any]:
        loads = self._col.values.loads
        return [loads(value) for _, value in self._col.scan(self._prefix())]

    def add(self, value: Any) -> None:
        check_element(value)
        col = self._col
        self._put(self._prefix() + col.next_seq(), col.values.dumps(value))

    def add_all(self, values: list[Any]) -> None:
        items = checked_elements(values, "add_all")
        if items:
            col = self._col
            col.write(col.layout.encode(col, self._prefix(), items))

    def update(self, values: list[Any]) -> None:
        items = checked_elements(values, "update")
        self.update_internal(items or None)

    def _merge(self, a: Any, b: Any) -> Any:
        a.extend(b)
        return a
