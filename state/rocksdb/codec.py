"""The bytes of the RocksDB backend: Flink's key layout, and value codecs.

A RocksDB key is ``key group | key | namespace`` (``| user key`` for map entries,
``| sequence`` for list elements):

- the key group is 1 byte big-endian when max parallelism is at most 128, else 2, so
  one key group is one contiguous key range (dropping key groups is a range delete);
- the key and the user key are written by their Flink serializers, the namespace as a
  tag byte (0: void, 1: typed) followed by its serializer's bytes.

Every Flink serializer is self-delimiting: reading a value consumes exactly the bytes
that were written for it (fixed widths, length-prefixed strings, byte arrays, lists and
maps, row null masks then fields). So no encoding of a key is a proper prefix of another
key's encoding, and ``key group | key | namespace`` of one (key, namespace) is a prefix
of its entries and of no other pair's entries: reading, listing and clearing one
(key, namespace) are prefix scans. Equal keys have equal bytes (canonical NaN, tuples
and namedtuples alike), so a key is stored by value.

A value is its serializer's bytes; with TTL, 8 bytes of big-endian timestamp come first
(Flink's TtlValue layout), which is what the compaction-style sweep reads without
decoding. Map values carry a null flag (after the timestamp), since a map value may be
``None``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ..errors import SerializationError, StateTypeError
from ..serializers.base import TypeSerializer
from ..serializers.lookup import serializer_for
from ..types.canonical import canonicalizer
from ..types.mapping import BasicTypeInfo, TypeInformation, as_inferred, infer_type

Dumps = Callable[[Any], bytes]
Loads = Callable[[bytes], Any]

VOID_NAMESPACE = b"\x00"
_TYPED_NAMESPACE = b"\x01"
_FIXED = {"BYTE": "b", "SHORT": "h", "INT": "i", "LONG": "q", "FLOAT": "f", "DOUBLE": "d"}
_INT64 = struct.Struct(">q")


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key above every key starting with ``prefix`` (an exclusive range end)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        raise ValueError("a prefix of 0xff bytes has no end")
    return stripped[:-1] + bytes([stripped[-1] + 1])


def key_group_prefixes(max_parallelism: int) -> list[bytes]:
    """The prefix bytes of every key group (1 byte up to 128 key groups, else 2)."""
    width = 1 if max_parallelism <= 128 else 2
    return [kg.to_bytes(width, "big") for kg in range(max_parallelism)]


def value_dumps(type_info: TypeInformation) -> Dumps:
    """Fast bytes of one value of ``type_info`` (fixed-width numbers skip the generic path)."""
    ser = serializer_for(type_info)
    to_bytes = ser.to_bytes
    fmt = _FIXED.get(type_info.name) if isinstance(type_info, BasicTypeInfo) else None
    if fmt is None:
        return to_bytes
    pack = struct.Struct(">" + fmt).pack
    exact = int if fmt in "bhiq" else float

    def dumps(value: Any) -> bytes:
        if type(value) is exact and value == value:  # every NaN: the serializer's canonical bits
            try:
                return pack(value)
            except struct.error:
                pass  # out of range: the serializer raises the typed error
        return to_bytes(value)

    return dumps


def key_loads(type_info: TypeInformation) -> Loads:
    """:func:`value_loads` for keys and map user keys: the value in its canonical form
    (:mod:`..canonical`), so that ``-0.0`` and ``0.0`` stay two keys in a dict."""
    loads = value_loads(type_info)
    canon = canonicalizer(type_info)
    if canon is None:
        return loads
    return lambda data: canon(loads(data))


def value_loads(type_info: TypeInformation) -> Loads:
    ser = serializer_for(type_info)
    fmt = _FIXED.get(type_info.name) if isinstance(type_info, BasicTypeInfo) else None
    if fmt is None:
        return ser.from_bytes
    unpack = struct.Struct(">" + fmt).unpack

    def loads(data: bytes) -> Any:
        return unpack(data)[0]

    return loads


class ValueCodec:
    """Bytes of stored values: plain, or ``(timestamp, value)`` TtlValues with ``ttl``.

    ``nullable`` (map values) adds a null flag so that ``None`` round-trips; ``key`` (map
    user keys) reads values in their canonical form (:func:`key_loads`).
    """

    def __init__(
        self, type_info: TypeInformation, ttl: bool, nullable: bool = False, key: bool = False
    ) -> None:
        self.ttl = ttl
        plain, load = value_dumps(type_info), (key_loads if key else value_loads)(type_info)
        self.dumps: Dumps
        self.loads: Loads
        if not ttl and not nullable:
            self.dumps, self.loads = plain, load
        elif ttl and not nullable:
            self.dumps, self.loads = self._ttl_dumps(plain), self._ttl_loads(load)
        else:
            self.dumps, self.loads = self._nullable_dumps(plain, ttl), self._nullable_loads(load, ttl)

    @staticmethod
    def _ttl_dumps(plain: Dumps) -> Dumps:
        pack = _INT64.pack

        def dumps(stored: Any) -> bytes:
            return pack(stored[0]) + plain(stored[1])

        return dumps

    @staticmethod
    def _ttl_loads(load: Loads) -> Loads:
        unpack = _INT64.unpack_from

        def loads(data: bytes) -> Any:
            return (unpack(data)[0], load(data[8:]))

        return loads

    @staticmethod
    def _nullable_dumps(plain: Dumps, ttl: bool) -> Dumps:
        def dumps(stored: Any) -> bytes:
            head = b""
            if ttl:
                head = _INT64.pack(stored[0])
                stored = stored[1]
            return head + (b"\x00" if stored is None else b"\x01" + plain(stored))

        return dumps

    @staticmethod
    def _nullable_loads(load: Loads, ttl: bool) -> Loads:
        def loads(data: bytes) -> Any:
            start = 8 if ttl else 0
            if len(data) <= start:
                raise SerializationError(f"a map value of {len(data)} bytes is truncated")
            value = None if data[start] == 0 else load(data[start + 1 :])
            return (_INT64.unpack_from(data)[0], value) if ttl else value

        return loads


def timestamp_of(data: bytes) -> int:
    """The TTL timestamp of a stored TTL value's bytes (the first 8 bytes)."""
    return int(_INT64.unpack_from(data)[0])


class NamespaceCodec:
    """A state's namespace type (fixed at the first typed namespace) and namespace bytes."""

    def __init__(self, state_name: str) -> None:
        self._state = state_name
        self.type: TypeInformation | None = None
        self._pytype: type | None = None
        self._ser: TypeSerializer | None = None

    def set_type(self, type_info: TypeInformation | None) -> None:
        if type_info is not None:
            self.type, self._pytype, self._ser = type_info, None, serializer_for(type_info)

    def check(self, namespace: Any) -> None:
        """Adopt the first typed namespace's type; refuse namespaces of another type."""
        if namespace is None or type(namespace) is self._pytype:
            return
        inferred = infer_type(namespace)
        if self.type is None:
            self.set_type(inferred)
        elif inferred != as_inferred(self.type):
            raise StateTypeError(
                f"namespace {namespace!r} does not match the namespace type {self.type} "
                f"of state {self._state!r}",
                code="NAMESPACE_TYPE_MISMATCH",
            )
        self._pytype = type(namespace)

    def dumps(self, namespace: Any) -> bytes:
        if namespace is None:
            return VOID_NAMESPACE
        assert self._ser is not None
        return _TYPED_NAMESPACE + self._ser.to_bytes(namespace)

    def read(self, data: bytes, pos: int) -> tuple[Any, int]:
        """The namespace at ``pos`` of a RocksDB key, and the position after it."""
        tag = data[pos]
        if tag == 0:
            return None, pos + 1
        if tag != 1 or self._ser is None:
            raise SerializationError(f"bad namespace tag {tag} in a key of state {self._state!r}")
        return self._ser.read(data, pos + 1)


class KeyCodec:
    """Key-group prefixes and key bytes, shared by every state of one backend."""

    def __init__(self, max_parallelism: int, kg_start: int) -> None:
        prefixes = key_group_prefixes(max_parallelism)
        self.width = len(prefixes[0])
        self.absolute = prefixes
        self.set_range_start(kg_start)
        self._ser: TypeSerializer | None = None
        self._canon: Callable[[Any], Any] | None = None
        self.dumps: Dumps = self._no_type

    @staticmethod
    def _no_type(key: Any) -> bytes:
        raise StateTypeError("the backend has no key type yet", code="NO_CURRENT_KEY")

    def set_type(self, key_type: TypeInformation) -> None:
        self._ser = serializer_for(key_type)
        self._canon = canonicalizer(key_type)
        fmt = _FIXED.get(key_type.name) if isinstance(key_type, BasicTypeInfo) else None
        # set_current_key has checked the key (type and range) already: pack it directly
        self.dumps = struct.Struct(">" + fmt).pack if fmt in ("b", "h", "i", "q") else value_dumps(key_type)

    def set_range_start(self, kg_start: int) -> None:
        self.in_range = self.absolute[kg_start:]

    def group_prefix(self, kgi: int) -> bytes:
        """The prefix of key-group index ``kgi`` of the backend's range."""
        return self.in_range[kgi]

    def read_key(self, data: bytes) -> tuple[Any, int]:
        """The key of a RocksDB key (canonical: :mod:`..canonical`) and the position after it."""
        assert self._ser is not None
        try:
            key, pos = self._ser.read(data, self.width)
            return (key if self._canon is None else self._canon(key)), pos
        except (struct.error, IndexError, ValueError, TypeError) as exc:
            raise SerializationError(f"cannot read the key of RocksDB key {data!r}: {exc}") from exc
