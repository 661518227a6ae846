"""RocksDB ValueState: one entry per key and namespace; ``update(None)`` removes it."""

from __future__ import annotations

from typing import Any

from ..interfaces import ValueState
from .base import AbstractRocksDBState


class RocksDBValueState(AbstractRocksDBState, ValueState[Any]):
    __slots__ = ()

    # The per-record path of most jobs: the prefix is built inline when the key changed.

    def value(self) -> Any:
        ctx = self._ctx
        key = ctx.key
        if key is self._ck:
            prefix = self._pk
        elif ctx.kgi < 0:
            raise self._no_key()
        else:
            keys = self._col.keys
            prefix = self._pk = keys.in_range[ctx.kgi] + keys.dumps(key) + self._ns_bytes
            self._ck = key
        data = self._get(prefix)
        return None if data is None else self._col.values.loads(data)

    def update(self, value: Any) -> None:
        ctx = self._ctx
        key = ctx.key
        if key is self._ck:
            prefix = self._pk
        elif ctx.kgi < 0:
            raise self._no_key()
        else:
            keys = self._col.keys
            prefix = self._pk = keys.in_range[ctx.kgi] + keys.dumps(key) + self._ns_bytes
            self._ck = key
        if value is None:
            self._delete(prefix)
        else:
            self._put(prefix, self._col.values.dumps(value))
