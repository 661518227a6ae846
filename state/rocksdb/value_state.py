"""RocksDB ValueState: one entry per key and namespace; ``update(None)`` removes it."""

from __future__ import annotations

from typing import Any

from ..interfaces import ValueState
from .base import AbstractRocksDBState


class RocksDBValueState(AbstractRocksDBState, ValueState[Any]):
    __slots__ = ()

    def value(self) -> Any:
        ctx = self._ctx
        data = self._get(self._pk if ctx.key is self._ck else self._prefix())
        return None if data is None else self._col.values.loads(data)

    def update(self, value: Any) -> None:
        ctx = self._ctx
        prefix = self._pk if ctx.key is self._ck else self._prefix()
        if value is None:
            self._delete(prefix)
        else:
            self._put(prefix, self._col.values.dumps(value))
