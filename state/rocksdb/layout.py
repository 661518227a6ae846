"""How one (key, namespace)'s stored state lies in RocksDB, per state kind.

- single: one entry, the value (VALUE, REDUCING, AGGREGATING);
- list: one entry per element, keyed ``prefix | sequence`` (appends write one entry and
  read nothing: rocksdict has no merge operator, so this is the append-only layout);
- map: one entry per map entry, keyed ``prefix | serialized user key``.

A stored state is what the heap backend keeps for the same (key, namespace): the value,
a list or a dict (with TTL, of ``(timestamp, value)`` tuples).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from ..descriptors import StateKind
from .codec import KeyCodec, NamespaceCodec, ValueCodec

Entries = list[tuple[bytes, bytes]]


class Column(Protocol):
    """What a layout uses of the column it lays states out in (a
    :class:`~.column.StateColumn`): its codecs and its reads and writes."""

    keys: KeyCodec
    namespaces: NamespaceCodec
    values: ValueCodec
    user_keys: ValueCodec | None
    user_key_dumps: Callable[[Any], bytes] | None

    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def write(self, puts: Sequence[tuple[bytes, bytes]], deletes: Sequence[bytes] = ()) -> None: ...

    def scan(self, prefix: bytes) -> Entries: ...

    def next_seq(self) -> bytes: ...


class Layout(ABC):
    """Encoding and decoding of stored states of one kind."""

    single = False
    """A stored state is one entry whose key is the scope prefix itself."""

    @abstractmethod
    def prefix_len(self, col: Column, key: bytes) -> int:
        """How many bytes of an entry's key are its (key group, key, namespace) prefix."""

    def scopes(self, col: Column, keys: Iterable[bytes]) -> Iterable[bytes]:
        """The scope prefixes of entry keys (change recording; repeats may stay)."""
        return [key[: self.prefix_len(col, key)] for key in dict.fromkeys(keys)]

    @abstractmethod
    def decode(self, col: Column, prefix: bytes, entries: Entries) -> Any:
        """The stored state of a group's entries."""

    @abstractmethod
    def encode(self, col: Column, prefix: bytes, stored: Any) -> Entries:
        """The entries of a stored state."""

    def read(self, col: Column, prefix: bytes) -> Any:
        entries = col.scan(prefix)
        return self.decode(col, prefix, entries) if entries else None

    def replace(self, col: Column, prefix: bytes, stored: Any) -> None:
        """Make ``stored`` (``None``: nothing) the state at ``prefix``, in one batch."""
        old = [key for key, _ in col.scan(prefix)]
        col.write([] if stored is None else self.encode(col, prefix, stored), old)


class SingleLayout(Layout):
    single = True

    def prefix_len(self, col: Column, key: bytes) -> int:
        return len(key)

    def scopes(self, col: Column, keys: Iterable[bytes]) -> Iterable[bytes]:
        return keys

    def decode(self, col: Column, prefix: bytes, entries: Entries) -> Any:
        return col.values.loads(entries[0][1])

    def encode(self, col: Column, prefix: bytes, stored: Any) -> Entries:
        return [(prefix, col.values.dumps(stored))]

    def read(self, col: Column, prefix: bytes) -> Any:
        data = col.get(prefix)
        return None if data is None else col.values.loads(data)

    def replace(self, col: Column, prefix: bytes, stored: Any) -> None:
        if stored is None:
            col.delete(prefix)
        else:
            col.put(prefix, col.values.dumps(stored))


class ListLayout(Layout):
    def prefix_len(self, col: Column, key: bytes) -> int:
        return len(key) - 8

    def scopes(self, col: Column, keys: Iterable[bytes]) -> Iterable[bytes]:
        return [key[:-8] for key in keys]

    def decode(self, col: Column, prefix: bytes, entries: Entries) -> Any:
        loads = col.values.loads
        return [loads(value) for _, value in entries]

    def encode(self, col: Column, prefix: bytes, stored: Any) -> Entries:
        dumps = col.values.dumps
        return [(prefix + col.next_seq(), dumps(element)) for element in stored]


class MapLayout(Layout):
    def prefix_len(self, col: Column, key: bytes) -> int:
        _, pos = col.keys.read_key(key)
        _, pos = col.namespaces.read(key, pos)
        return pos

    def decode(self, col: Column, prefix: bytes, entries: Entries) -> Any:
        assert col.user_keys is not None
        key_loads, loads, start = col.user_keys.loads, col.values.loads, len(prefix)
        return {key_loads(key[start:]): loads(value) for key, value in entries}

    def encode(self, col: Column, prefix: bytes, stored: Any) -> Entries:
        assert col.user_key_dumps is not None
        key_dumps, dumps = col.user_key_dumps, col.values.dumps
        return [(prefix + key_dumps(k), dumps(v)) for k, v in stored.items()]


_SINGLE, _LIST, _MAP = SingleLayout(), ListLayout(), MapLayout()


def layout_for(kind: StateKind) -> Layout:
    if kind is StateKind.LIST:
        return _LIST
    return _MAP if kind is StateKind.MAP else _SINGLE
