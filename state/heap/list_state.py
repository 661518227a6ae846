"""Heap ListState: ``None`` elements are refused, an empty list reads as empty."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..interfaces import ListState
from ..validation import check_element, checked_elements
from .base import AbstractHeapState


class HeapListState(AbstractHeapState, ListState[Any]):
    __slots__ = ()

    def get(self) -> Iterable[Any]:
        ctx = self._ctx
        stored = self._maps[ctx.kgi].get(ctx.key, self._ns)
        return [] if stored is None else list(stored)

    def add(self, value: Any) -> None:
        check_element(value)
        ctx = self._ctx
        state_map = self._maps[ctx.kgi]
        stored = state_map.get(ctx.key, self._ns)
        if stored is None:
            stored = [value]
            state_map.put(ctx.key, self._ns, stored)
        else:
            stored.append(value)
        self._changed(stored)

    def add_all(self, values: list[Any]) -> None:
        items = checked_elements(values, "add_all")
        if not items:
            return
        ctx = self._ctx
        state_map = self._maps[ctx.kgi]
        stored = state_map.get(ctx.key, self._ns)
        if stored is None:
            stored = items
            state_map.put(ctx.key, self._ns, stored)
        else:
            stored.extend(items)
        self._changed(stored)

    def update(self, values: list[Any]) -> None:
        items = checked_elements(values, "update")
        self.update_internal(items or None)

    def _merge(self, a: Any, b: Any) -> Any:
        a.extend(b)
        return a
