"""The shared base of RocksDB states: the bytes prefix of the current key and namespace.

The prefix ``key group | key | namespace`` is cached per state and rebuilt only when the
current key object or the namespace changes, so the per-record path is one RocksDB call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..errors import StateAccessError
from ..interfaces import InternalMergingState
from .column import StateColumn

_UNSET = object()


class AbstractRocksDBState(InternalMergingState):
    """Reads and writes one state's column for the current key and namespace.

    Subclasses spell out their kind's rules; merging kinds define :meth:`_merge`.
    """

    __slots__ = ("_col", "_ctx", "_closed", "_ns", "_ns_bytes", "_ck", "_pk", "_get", "_put", "_delete")

    def __init__(self, column: StateColumn, ctx: Any, closed: Callable[[], bool]) -> None:
        self._col = column
        self._ctx = ctx
        self._closed = closed
        self._ns: Any = None
        self._ns_bytes = column.namespaces.dumps(None)
        self._ck: Any = _UNSET  # the key object the cached prefix was built for
        self._pk = b""
        self._get: Callable[[bytes], Any] = column.cf.get if column.buffer is None else column.get
        self._put = column.put
        self._delete = column.delete
        column.readers.append(self._bind_get)

    def _bind_get(self, get: Callable[[bytes], Any]) -> None:
        """Point reads: the column family directly, or through the write buffer (write_batch)."""
        self._get = get

    def set_current_namespace(self, namespace: Any) -> None:
        if namespace is self._ns:
            return
        codec = self._col.namespaces
        codec.check(namespace)
        self._ns = namespace
        self._ns_bytes = codec.dumps(namespace)
        self._ck = _UNSET

    def _prefix(self) -> bytes:
        """The prefix of the current key and namespace (rebuilt when the key changed)."""
        ctx = self._ctx
        if ctx.key is self._ck:
            return self._pk
        if ctx.kgi < 0:
            raise self._no_key()
        keys = self._col.keys
        prefix: bytes = keys.in_range[ctx.kgi] + keys.dumps(ctx.key) + self._ns_bytes
        self._ck, self._pk = ctx.key, prefix
        return prefix

    def _prefix_of(self, namespace: Any) -> bytes:
        ctx = self._ctx
        if ctx.kgi < 0:
            raise self._no_key()
        self._col.namespaces.check(namespace)
        return self._col.prefix(self._col.keys.group_prefix(ctx.kgi), ctx.key, namespace)

    def _no_key(self) -> StateAccessError:
        if self._closed():
            return StateAccessError("the backend is closed", code="BACKEND_CLOSED")
        return StateAccessError(
            "no current key: call set_current_key(key) before using keyed state", code="NO_CURRENT_KEY"
        )

    def clear(self) -> None:
        self._col.layout.replace(self._col, self._prefix(), None)

    def get_internal(self) -> Any:
        return self._col.layout.read(self._col, self._prefix())

    def update_internal(self, value: Any) -> None:
        self._col.layout.replace(self._col, self._prefix(), value)

    def _merge(self, a: Any, b: Any) -> Any:
        raise TypeError(f"{type(self).__name__} does not merge namespaces")

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        col = self._col
        layout = col.layout
        merged = None
        for source in sources:
            if source == target:
                continue
            prefix = self._prefix_of(source)
            old = layout.read(col, prefix)
            if old is not None:
                layout.replace(col, prefix, None)
                merged = old if merged is None else self._merge(merged, old)
        if merged is not None:
            prefix = self._prefix_of(target)
            current = layout.read(col, prefix)
            result = merged if current is None else self._merge(current, merged)
            layout.replace(col, prefix, result)  # None: a TTL merge of expired states
