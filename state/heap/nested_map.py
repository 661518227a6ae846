"""Plain nested dicts, namespace -> key -> state (Flink's NestedStateMap); synchronous snapshots."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .state_map import CopyFn, Entry, MapCursor, StateMap, StateMapSnapshot, decompose, int64_items


class NestedStateMap(StateMap):
    """See the module docstring. A snapshot copies every entry when it is taken."""

    __slots__ = ("_copy", "_data", "_size")

    def __init__(self, copy_state: CopyFn | None = None) -> None:
        self._copy = copy_state
        self._data: dict[Any, dict[Any, Any]] = {}
        self._size = 0

    def get(self, key: Any, namespace: Any) -> Any:
        inner = self._data.get(namespace)
        return None if inner is None else inner.get(key)

    def put(self, key: Any, namespace: Any, state: Any) -> None:
        inner = self._data.get(namespace)
        if inner is None:
            inner = self._data[namespace] = {}
        n = len(inner)
        inner[key] = state
        self._size += len(inner) - n

    def remove(self, key: Any, namespace: Any) -> Any:
        inner = self._data.get(namespace)
        if inner is None or key not in inner:
            return None
        state = inner.pop(key)
        self._size -= 1
        if not inner:
            del self._data[namespace]
        return state

    def contains(self, key: Any, namespace: Any) -> bool:
        inner = self._data.get(namespace)
        return inner is not None and key in inner

    def __len__(self) -> int:
        return self._size

    def entries(self) -> Iterator[Entry]:
        for ns, inner in self._data.items():
            for key, state in inner.items():
                yield key, ns, state

    def keys(self, namespace: Any) -> list[Any]:
        return list(self._data.get(namespace, ()))

    def snapshot(self) -> StateMapSnapshot:
        copy = self._copy
        if copy is None:
            data = [(ns, dict(inner)) for ns, inner in self._data.items()]
        else:
            data = [(ns, {k: copy(v) for k, v in inner.items()}) for ns, inner in self._data.items()]
        return _NestedSnapshot(data)

    def cursor(self) -> MapCursor:
        return _NestedCursor(self)


_EMPTY: dict[Any, Any] = {}


class _NestedSnapshot(StateMapSnapshot):
    __slots__ = ("_data", "_index")

    def __init__(self, data: list[tuple[Any, dict[Any, Any]]]) -> None:
        self._data = data
        self._index: dict[Any, dict[Any, Any]] | None = None

    def resolve(self, cks: Iterable[Any]) -> tuple[list[Any], list[Any], list[Any]]:
        if self._index is None:
            self._index = dict(self._data)
        index = self._index
        ids = list(cks)
        if any(type(ck) is tuple for ck in ids):
            got = [None if (inner := index.get(ns)) is None else inner.get(key)
                   for key, ns in map(decompose, ids)]  # fmt: skip
        else:  # keys alone, all in the void namespace: the gets at C speed
            got = list(map(index.get(None, _EMPTY).get, ids))
        missing = [ck for ck, state in zip(ids, got, strict=True) if state is None]
        if not missing:
            return ids, got, []
        found = [ck for ck, state in zip(ids, got, strict=True) if state is not None]
        return found, [state for state in got if state is not None], missing

    def entries(self) -> Iterator[Entry]:
        for ns, inner in self._data:
            for key, state in inner.items():
                yield key, ns, state

    def int64_items(self) -> tuple[bytes, bytes] | None:
        return int64_items([[inner for _, inner in self._data]])

    def raw_columns(self, composite: bool) -> tuple[list[Any], list[Any] | None, list[Any]]:
        keys: list[Any] = []
        namespaces: list[Any] = []
        states: list[Any] = []
        for ns, inner in self._data:
            keys.extend(inner)
            states.extend(inner.values())
            if composite:
                namespaces.extend([ns] * len(inner))
        return keys, namespaces if composite else None, states

    def release(self) -> None:
        self._data = []
        self._index = None


class _NestedCursor(MapCursor):
    """Walks namespaces in order, a chunk of keys at a time (handles are keys)."""

    CHUNK = 64
    __slots__ = ("_map", "_namespaces", "_keys", "_ns", "_pos")

    def __init__(self, owner: NestedStateMap) -> None:
        self._map: NestedStateMap = owner
        self._namespaces: list[Any] | None = None
        self._keys: list[Any] = []
        self._ns: Any = None
        self._pos = 0

    def next_batch(self) -> list[tuple[Any, Any]]:
        data = self._map._data
        if self._namespaces is None:
            self._namespaces = list(data)
        while True:
            if self._pos >= len(self._keys):
                if not self._namespaces:
                    self._namespaces, self._keys, self._pos = None, [], 0
                    return []
                self._ns = self._namespaces.pop()
                self._keys, self._pos = list(data.get(self._ns, ())), 0
            chunk = self._keys[self._pos : self._pos + self.CHUNK]
            self._pos += self.CHUNK
            inner = data.get(self._ns)
            if inner is not None:
                batch = [(k, inner[k]) for k in chunk if k in inner]
                if batch:
                    return batch

    def entry(self, handle: Any) -> tuple[Any, Any]:
        return handle, self._ns
