"""Heap MapState: one dict per key and namespace; an emptied map is removed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..interfaces import MapState
from ..validation import check_user_key
from .base import AbstractHeapState
from .state_table import StateTable


class HeapMapState(AbstractHeapState, MapState[Any, Any]):
    __slots__ = ()

    def _stored(self) -> Any:
        ctx = self._ctx
        return self._maps[ctx.kgi].get(ctx.key, self._ns)

    def get(self, key: Any) -> Any:
        stored = self._stored()
        return None if stored is None else stored.get(key)

    def put(self, key: Any, value: Any) -> None:
        check_user_key(key)
        ctx = self._ctx
        state_map = self._maps[ctx.kgi]
        stored = state_map.get(ctx.key, self._ns)
        if stored is None:
            stored = {key: value}
            state_map.put(ctx.key, self._ns, stored)
        else:
            stored[key] = value
        self._changed(stored)

    def put_all(self, dict_value: Mapping[Any, Any] | None) -> None:
        if dict_value is None:
            return
        items = dict(dict_value)
        if not items:
            return
        for key in items:
            check_user_key(key)
        ctx = self._ctx
        state_map = self._maps[ctx.kgi]
        stored = state_map.get(ctx.key, self._ns)
        if stored is None:
            stored = items
            state_map.put(ctx.key, self._ns, stored)
        else:
            stored.update(items)
        self._changed(stored)

    def remove(self, key: Any) -> None:
        ctx = self._ctx
        state_map = self._maps[ctx.kgi]
        stored = state_map.get(ctx.key, self._ns)
        if stored is not None and key in stored:
            del stored[key]
            if not stored:
                state_map.remove(ctx.key, self._ns)
            self._changed(stored or None)

    def contains(self, key: Any) -> bool:
        stored = self._stored()
        return stored is not None and key in stored

    def items(self) -> Iterable[tuple[Any, Any]]:
        stored = self._stored()
        return [] if stored is None else list(stored.items())

    def keys(self) -> Iterable[Any]:
        stored = self._stored()
        return [] if stored is None else list(stored)

    def values(self) -> Iterable[Any]:
        stored = self._stored()
        return [] if stored is None else list(stored.values())

    def is_empty(self) -> bool:
        return not self._stored()


class HeapFloatKeyMapState(HeapMapState):
    """A map whose user keys have FLOAT parts: they are rounded to what a checkpoint
    stores (:mod:`..canonical`) on the way in, as RocksDB's serialized keys are."""

    __slots__ = ("_canon",)

    def __init__(self, table: StateTable, ctx: Any, canon: Callable[[Any], Any]) -> None:
        super().__init__(table, ctx)
        self._canon = canon

    def get(self, key: Any) -> Any:
        return super().get(self._canon(key))

    def put(self, key: Any, value: Any) -> None:
        super().put(None if key is None else self._canon(key), value)

    def put_all(self, dict_value: Mapping[Any, Any] | None) -> None:
        canon = self._canon
        if dict_value is not None:
            dict_value = {None if k is None else canon(k): v for k, v in dict(dict_value).items()}
        super().put_all(dict_value)

    def remove(self, key: Any) -> None:
        super().remove(self._canon(key))

    def contains(self, key: Any) -> bool:
        return super().contains(self._canon(key))
