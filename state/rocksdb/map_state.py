"""RocksDB MapState: one entry per map entry, keyed by the serialized user key.

An emptied map has no entries left, so it is gone, as on the heap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..interfaces import MapState
from ..validation import check_user_key
from .base import AbstractRocksDBState


class RocksDBMapState(AbstractRocksDBState, MapState[Any, Any]):
    __slots__ = ()

    def _entry_key(self, key: Any) -> bytes:
        dumps = self._col.user_key_dumps
        assert dumps is not None
        return self._prefix() + dumps(key)

    def get(self, key: Any) -> Any:
        if key is None:
            return None
        data = self._get(self._entry_key(key))
        return None if data is None else self._col.values.loads(data)

    def put(self, key: Any, value: Any) -> None:
        check_user_key(key)
        self._put(self._entry_key(key), self._col.values.dumps(value))

    def put_all(self, dict_value: Mapping[Any, Any] | None) -> None:
        if dict_value is None:
            return
        items = dict(dict_value)
        for key in items:
            check_user_key(key)
        if items:
            col = self._col
            col.write(col.layout.encode(col, self._prefix(), items))

    def remove(self, key: Any) -> None:
        if key is None:
            return
        entry = self._entry_key(key)
        if self._col.changed is not None and self._get(entry) is None:
            return  # recording changes: removing nothing is no change
        self._delete(entry)

    def contains(self, key: Any) -> bool:
        return key is not None and self._get(self._entry_key(key)) is not None

    def _items(self) -> list[tuple[Any, Any]]:
        col = self._col
        prefix = self._prefix()
        entries = col.scan(prefix)
        return list(col.layout.decode(col, prefix, entries).items()) if entries else []

    def items(self) -> Iterable[tuple[Any, Any]]:
        return self._items()

    def keys(self) -> Iterable[Any]:
        return [k for k, _ in self._items()]

    def values(self) -> Iterable[Any]:
        return [v for _, v in self._items()]

    def is_empty(self) -> bool:
        return not self._col.has_prefix(self._prefix())
