"""The key-group blocks of a keyed state stream, decoded into per-state rows.

Canonical savepoints (both backends) write, at each key group's offset (inside one snappy
framed stream per key group when compressed): a short state id, then ``int length, key
bytes, int length, value bytes`` pairs; a key whose first byte has bit 0x80 set is followed
by a short, 0xFFFF ending the group or else the next state id. Key bytes are the key-group
prefix, the key, the namespace (each followed by its length's bytes when both key and
namespace are variable-length) and, for MapState, the user key. Heap-backend checkpoints
write, per key group, ``int key group`` then per state ``short id`` and either ``int n``
(namespace, key, value) triples or ``int n`` timers. A timer (a priority-queue state's
element; in canonical savepoints its key bytes after the key-group prefix, with an empty
value) is Flink's ``TimerSerializer`` layout: the timestamp with its sign bit flipped (so
bytes sort as numbers), the key, the namespace; its rows hold the timestamp as the value.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from flinkstate.state.errors import SerializationError
from flinkstate.state.serializers.base import TypeSerializer

from ..errors import FlinkFormatError, UnsupportedSerializerError
from ..metadata.metadata_read import KeyedHandle
from ..wire.data_read import Cursor
from ..wire.snappy_read import snappy_block
from .header_read import KeyedHeader, StateInfo
from .keyed_columns_read import block_columns, eligible, native_columns, native_plan

END_OF_GROUP = 0xFFFF
LIST_DELIMITER = 0x2C
_SIGN = 1 << 63


@dataclass
class StateRows:
    """Rows of one state: parallel lists. ``extra`` is the position (LIST) or user key (MAP)."""

    info: StateInfo
    key_group: list[int] = field(default_factory=list)
    key: list[Any] = field(default_factory=list)
    namespace: list[Any] = field(default_factory=list)
    extra: list[Any] = field(default_factory=list)
    value: list[Any] = field(default_factory=list)
    ttl: list[int | None] = field(default_factory=list)
    #: Key groups decoded as columns (:mod:`.keyed_columns_read`): (key group, keys, values).
    chunks: list[tuple[int, pa.Array, pa.Array]] = field(default_factory=list)

    def add(self, kg: int, key: Any, ns: Any, extra: Any, value: Any) -> None:
        if self.info.ttl:
            value, ts = value if value is not None else (None, None)
            self.ttl.append(ts)
        self.key_group.append(kg)
        self.key.append(key)
        self.namespace.append(ns)
        self.extra.append(extra)
        self.value.append(value)


def _length_bytes(n: int) -> int:
    """How many bytes Flink's variable-int-bytes encoding of ``n`` takes (at least one)."""
    count = 1
    while n > 0xFF:
        n >>= 8
        count += 1
    return count


class KeyGroupDecoder:
    """Decodes key groups of one keyed state stream into :class:`StateRows` per state."""

    def __init__(self, header: KeyedHeader, max_parallelism: int, where: str, states: Iterable[str]) -> None:
        self.header = header
        self.where = where
        self.prefix = 1 if max_parallelism <= 128 else 2
        wanted = set(states)
        self.rows = {s.state_id: StateRows(s) for s in header.states if s.name in wanted}
        key = header.key
        if key.serializer is None or not key.decodable:
            # Raw key bytes cannot be told apart from the namespace that follows them.
            raise UnsupportedSerializerError(f"{where}: key serializer {key.describe()} cannot be decoded")
        self.key_serializer = key.serializer
        self.key_fixed = key.fixed_width
        self.key_name = str(key.type_info)
        only = list(self.rows.values())
        self.columnar = only[0] if len(only) == 1 and eligible(only[0].info, self.key_name) else None
        #: How the C accelerator decodes the single wanted state, or None.
        self.native = native_plan(only[0].info, key) if len(only) == 1 else None

    def _state(self, c: Cursor, state_id: int, at: int) -> StateRows | None:
        if not 0 <= state_id < len(self.header.states):
            raise c.fail(f"unknown state id {state_id}", at)
        return self.rows.get(state_id)

    def _check_prefix(self, raw: bytes, kg: int) -> None:
        got = int.from_bytes(raw[: self.prefix], "big") & ~(0x80 << (8 * (self.prefix - 1)))
        if got != kg:
            raise SerializationError(f"key-group prefix {got} in key group {kg}")

    def _split_key(self, raw: bytes, rows: StateRows, kg: int, where: str) -> tuple[Any, Any, bytes]:
        self._check_prefix(raw, kg)
        info = rows.info
        ns_type = info.namespace
        ambiguous = not self.key_fixed and ns_type is not None and not ns_type.fixed_width
        key, pos = self.key_serializer.read_at(raw, self.prefix)
        if ambiguous:
            pos += _length_bytes(pos - self.prefix)
        if ns_type is None or ns_type.void:
            ns, pos = None, pos + 1
        else:
            assert ns_type.serializer is not None
            start = pos
            ns, pos = ns_type.serializer.read_at(raw, pos)
            if ambiguous:
                pos += _length_bytes(pos - start)
        if pos > len(raw):
            raise SerializationError(f"truncated key bytes: {len(raw)} bytes, {pos} needed")
        return key, ns, raw[pos:]

    def _value(self, info: StateInfo, raw: bytes) -> Any:
        serializer = info.value.serializer
        if serializer is None:
            raise SerializationError(f"no decoder for {info.value.describe()}")
        return serializer.from_bytes(raw)

    def _timer(self, info: StateInfo, buf: bytes, pos: int) -> tuple[Any, Any, int, int]:
        """(key, namespace, timestamp, end) of the timer at ``buf[pos]``."""
        children = info.value.children
        if len(children) != 2:
            raise SerializationError(f"timer state {info.name} has no key/namespace serializers")
        if len(buf) < pos + 8:
            raise SerializationError("truncated timer timestamp")
        flipped = int.from_bytes(buf[pos : pos + 8], "big") ^ _SIGN
        key, pos = self.key_serializer.read_at(buf, pos + 8)
        ns_type = children[1]
        if ns_type.void:
            ns, pos = None, pos + 1
        else:
            if ns_type.serializer is None:
                raise SerializationError(f"no decoder for the timer namespace {ns_type.describe()}")
            ns, pos = ns_type.serializer.read_at(buf, pos)
        return key, ns, flipped - (flipped >> 63 << 64), pos

    def _add(self, rows: StateRows, kg: int, key_raw: bytes, value_raw: bytes) -> None:
        info = rows.info
        if info.is_timer:
            self._check_prefix(key_raw, kg)
            key, ns, timestamp, end = self._timer(info, key_raw, self.prefix)
            if end != len(key_raw) or value_raw:
                raise SerializationError("trailing timer bytes")
            rows.add(kg, key, ns, None, timestamp)
            return
        key, ns, rest = self._split_key(key_raw, rows, kg, self.where)
        if info.kind == "MAP":
            assert info.user_key is not None and info.user_key.serializer is not None
            user_key = info.user_key.serializer.from_bytes(rest)
            if not value_raw or value_raw[0] > 1:
                raise SerializationError("bad map value null flag")
            value = None if value_raw[0] else self._value(info, value_raw[1:])
            rows.add(kg, key, ns, user_key, value)
            return
        if rest:
            raise SerializationError(f"{len(rest)} trailing key bytes")
        if info.kind != "LIST":
            rows.add(kg, key, ns, None, self._value(info, value_raw))
            return
        serializer = info.value.serializer
        if serializer is None or not info.value.decodable:
            raise SerializationError(f"list elements of {info.value.describe()} cannot be delimited")
        pos, position = 0, 0
        while pos < len(value_raw):
            if position:
                if value_raw[pos] != LIST_DELIMITER:
                    raise SerializationError(f"missing list delimiter at value byte {pos}")
                pos += 1
            element, pos = serializer.read_at(value_raw, pos)
            rows.add(kg, key, ns, position, element)
            position += 1

    def entry(self, rows: StateRows, kg: int, key_raw: bytes, value_raw: bytes, at: str) -> None:
        """Decode one (key bytes, value bytes) entry; ``at`` says where it is, for errors."""
        try:
            self._add(rows, kg, key_raw, value_raw)
        except (SerializationError, IndexError, ValueError) as exc:
            raise FlinkFormatError(
                f"{self.where}: state {rows.info.name}, key group {kg}: {exc} ({at})"
            ) from exc

    def _columns(self, buf: bytes, pos: int, kg: int) -> bool:
        """Whether the C or the NumPy path took the block at ``buf[pos]`` (into the one wanted
        state's chunks); not taken, the general path decodes it or names what is wrong."""
        if self.native is None and self.columnar is None:
            return False
        only = next(iter(self.rows.values()))
        state_id, states = only.info.state_id, len(self.header.states)
        found = None
        if self.native is not None:
            found = native_columns(buf, pos, kg, state_id, states, self.prefix, self.native)
        if found is None and self.columnar is not None:
            value = str(only.info.value.type_info)
            found = block_columns(buf, pos, kg, state_id, states, self.prefix, self.key_name, value)
        if found is not None:
            only.chunks.append((kg, *found))
        return found is not None

    def canonical(self, buf: bytes, pos: int, kg: int) -> None:
        """Decode the canonical key-group block starting at ``buf[pos]``."""
        if self._columns(buf, pos, kg):
            return
        c = Cursor(buf, self.where, pos)
        at = c.pos
        state_id = c.u16("state id")
        rows = self._state(c, state_id, at)
        while True:
            key_raw = c.take(c.count("key length"), "key")
            value_raw = c.take(c.count("value length"), "value")
            if not key_raw:
                raise c.fail("empty key")
            flagged = key_raw[0] & 0x80
            if rows is not None:
                self.entry(rows, kg, key_raw, value_raw, f"entry ending at byte offset {c.pos}")
            if flagged:
                at = c.pos
                state_id = c.u16("state id")
                if state_id == END_OF_GROUP:
                    return
                rows = self._state(c, state_id, at)

    def heap_checkpoint(self, buf: bytes, pos: int, kg: int) -> None:
        """Decode a heap checkpoint's key group: per state its entries or timers."""
        c = Cursor(buf, self.where, pos)
        at = c.pos
        if c.i32("key group") != kg:
            raise c.fail(f"key group block is not key group {kg}", at)
        remaining = set(self.rows)
        for _ in self.header.states:
            if not remaining:
                return
            at = c.pos
            state_id = c.u16("state id")
            if not 0 <= state_id < len(self.header.states):
                raise c.fail(f"unknown state id {state_id}", at)
            info = self.header.states[state_id]
            rows = self.rows.get(state_id)
            remaining.discard(state_id)
            if not info.is_timer and not (
                info.value.decodable and (info.user_key is None or info.user_key.decodable)
            ):
                raise UnsupportedSerializerError(
                    f"{self.where}: state {info.name} ({info.value.describe()}) precedes the wanted state in "
                    f"key group {kg} and cannot be delimited in a heap checkpoint, at byte offset {at}"
                )
            try:
                if info.is_timer:
                    self._heap_timers(c, info, rows, kg)
                else:
                    for _ in range(c.count(f"entry count of state {info.name}")):
                        self._heap_entry(c, info, rows, kg)
            except (SerializationError, IndexError, ValueError) as exc:
                raise FlinkFormatError(
                    f"{self.where}: state {info.name}, key group {kg}: {exc} (near byte offset {c.pos})"
                ) from exc

    def _read(self, c: Cursor, serializer: TypeSerializer | None, what: str) -> Any:
        if serializer is None:
            raise SerializationError(f"no decoder for the {what}")
        return c.value(serializer, what)

    def _heap_entry(self, c: Cursor, info: StateInfo, rows: StateRows | None, kg: int) -> None:
        ns_type = info.namespace
        ns = None if ns_type is None or ns_type.void else self._read(c, ns_type.serializer, "namespace")
        if ns_type is not None and ns_type.void:
            c.u8("void namespace")
        key = self._read(c, self.key_serializer, "key")
        element = info.value.serializer
        if info.kind == "LIST":
            for position in range(c.count("list size")):
                value = self._read(c, element, "list element")
                if rows is not None:
                    rows.add(kg, key, ns, position, value)
        elif info.kind == "MAP":
            user_key_serializer = info.user_key.serializer if info.user_key is not None else None
            for _ in range(c.count("map size")):
                user_key = self._read(c, user_key_serializer, "map key")
                value = None if c.boolean("map value null flag") else self._read(c, element, "map value")
                if rows is not None:
                    rows.add(kg, key, ns, user_key, value)
        else:
            value = self._read(c, element, "value")
            if rows is not None:
                rows.add(kg, key, ns, None, value)

    def _heap_timers(self, c: Cursor, info: StateInfo, rows: StateRows | None, kg: int) -> None:
        for _ in range(c.count("timer count", 8)):
            key, ns, timestamp, c.pos = self._timer(info, c.buf, c.pos)
            if rows is not None:
                rows.add(kg, key, ns, None, timestamp)


def heap_layout(data: bytes, handle: KeyedHandle) -> bool:
    """Whether a full checkpoint's stream (handle tag 3 or 12) has the heap backend's layout, not
    the canonical one (a RocksDB full checkpoint of Flink 1.13-1.15 shares the tags).

    A heap block starts with its key group as an int; a canonical one with a short state id and
    the first key's int length, which read as one int is 0 (or at least 65536), never a key group
    from 1 to 32767: the first non-empty key group other than 0 decides. Key group 0 alone (both
    read as 0 there) is heap when the short after the int is 0 (the first state's id; as a key
    length, impossible: keys are never empty).
    """
    first_zero = None
    for kg, offset in zip(handle.key_groups, handle.offsets, strict=True):
        if not offset or offset + 6 > len(data):
            continue
        if kg:
            return int.from_bytes(data[offset : offset + 4], "big") == kg
        first_zero = offset
    if first_zero is None:
        return True
    return data[first_zero : first_zero + 6] == bytes(6)


def decode_groups(
    data: bytes,
    handle: KeyedHandle,
    header: KeyedHeader,
    decoder: KeyGroupDecoder,
    wanted: set[int] | None,
    where: str,
) -> None:
    """Decode the wanted key groups of one canonical or heap-checkpoint state stream."""
    starts = sorted({o for o in handle.offsets if o} | {len(data)})
    heap = handle.kind == "heap_checkpoint" and heap_layout(data, handle)
    for kg, offset in zip(handle.key_groups, handle.offsets, strict=True):
        if not offset or (wanted is not None and kg not in wanted):
            continue
        if offset < header.end or offset >= len(data):
            raise FlinkFormatError(f"{where}: key group {kg} offset {offset} is outside the state data")
        if heap:
            decoder.heap_checkpoint(data, offset, kg)
        elif header.compressed:
            end = starts[starts.index(offset) + 1]
            decoder.canonical(snappy_block(data, offset, end, where), 0, kg)
        else:
            decoder.canonical(data, offset, kg)
