"""Heap ValueState: ``update(None)`` removes the value."""

from __future__ import annotations

from gc import is_tracked
from types import ModuleType
from typing import Any

from ..interfaces import ValueState
from .base import AbstractHeapState
from .state_map import track
from .state_table import compact

_valuepath: ModuleType | None
try:
    from . import _valuepath
except ImportError:  # built without a C compiler: the Python methods alone
    _valuepath = None


class HeapValueState(AbstractHeapState, ValueState[Any]):
    __slots__ = ()

    # The per-record path of most jobs: it uses the map's fast table when it can.

    def value(self) -> Any:
        ctx = self._ctx
        state_map = self._maps[ctx.kgi]
        key = ctx.key
        table = state_map.fast_table
        if table is not None and self._ns is None and type(key) is not tuple:
            bucket = table[hash(key) % len(table)]
            return None if bucket is None else bucket.get(key)
        return state_map.get(key, self._ns)

    def update(self, value: Any) -> None:
        ctx = self._ctx
        kgi = ctx.kgi
        state_map = self._maps[kgi]
        key = ctx.key
        if value is None:
            state_map.remove(key, self._ns)
            self._changed(None)
            return
        table = state_map.fast_table
        if table is not None and self._ns is None and type(key) is not tuple:
            bucket = table[hash(key) % len(table)]
            if bucket is not None and key in bucket:
                bucket[key] = value
                if not is_tracked(table) and is_tracked(bucket):
                    track(table)  # the bucket holds a tracked object now: see cow_map
                changes = self._changes
                if changes:
                    changed = changes[kgi]
                    changed.append(key)
                    changed.append(value)  # the state stored: the checkpoint needs no lookup
                    if len(changed) > self._compact_at:
                        self._compact_at = compact(changed)
                return
        state_map.put(key, self._ns, value)
        self._changed(value)


PYTHON_METHODS = (HeapValueState.value, HeapValueState.update)
"""The Python ``value()`` and ``update()``: the model of the C fast path and its fallback."""
if _valuepath is not None:
    _valuepath.install(HeapValueState, compact)
