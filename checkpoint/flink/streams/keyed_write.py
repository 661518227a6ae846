"""One subtask's keyed state stream of a canonical savepoint: the inverse of :mod:`.header_read`
and :mod:`.keyed_read`.

The stream is the header (:mod:`.header_write`: ``int version 6, bool compressed, key
serializer snapshot, short n`` state meta infos), then one block per key group holding entries, at the offset
``_metadata`` records (0 for a key group without entries). A block is ``short state id``,
then ``int length, key bytes, int length, value bytes`` pairs sorted by key bytes (RocksDB's
order); the last key of a state has bit 0x80 of its first byte set and is followed by the
next state's id or 0xFFFF, which ends the group. Key bytes: the key-group prefix (one byte
up to max parallelism 128, else two), the key, the namespace (:mod:`.namespaces_write`: the
void one is one 0 byte) and, for MapState, the user key; a timer queue's entries are timers
with empty values. Values: the value (Value, Reducing state) or accumulator
(AggregatingState), the elements joined by ``,``
(ListState), or per map entry a null flag byte and the value (MapState); with TTL each value
or element is preceded by its last-access timestamp (a long).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from flinkstate.state.errors import SerializationError
from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.serializers.base import TypeSerializer
from flinkstate.state.serializers.batch import batch_kind, encode_block
from flinkstate.state.serializers.lookup import serializer_for
from flinkstate.state.types.mapping import TypeInformation

from ..metadata.versions import FlinkTarget
from ..types.snapshots_write import (
    Snapshot,
    VerbatimSnapshot,
    key_snapshot,
)
from ..wire.data_write import Output
from .header_write import KeyedStateSpec, write_header
from .keyed_read import END_OF_GROUP, LIST_DELIMITER
from .namespaces_write import Namespace, timer_bytes

_META_FLAG = 0x80
_VOID_NAMESPACE = Namespace.VOID.encode(None)
_LONG = struct.Struct(">q")
_I32 = struct.Struct(">i")


class EntryEncoder:
    """Turns one state's :class:`StateColumns` of a key group into sorted (key, value) bytes."""

    def __init__(self, spec: KeyedStateSpec, key: TypeInformation, max_parallelism: int) -> None:
        self.spec = spec
        self.prefix = 1 if max_parallelism <= 128 else 2
        self._batch: tuple[int, int] | None = None
        if spec.carried:
            return
        self.key = serializer_for(key)
        self.value = spec.encoder or serializer_for(spec.value)
        self.user_key: TypeSerializer | None = (
            serializer_for(spec.user_key) if spec.user_key is not None else None
        )
        self.ns = spec.namespace.encode
        key_kind, value_kind = batch_kind(self.key), batch_kind(self.value)
        single = spec.kind in ("VALUE", "REDUCING", "AGGREGATING")
        if single and key_kind is not None and value_kind is not None:
            self._batch = (key_kind, value_kind)

    def _value(self, value: Any, timestamp: Any) -> bytes:
        data = self.value.to_bytes(value)
        if not self.spec.ttl:
            return data
        if timestamp is None:
            raise SerializationError("a TTL value without its last-access timestamp")
        return _LONG.pack(timestamp) + data

    def _entries(self, kg: int, key: Any, ns: Any, value: Any, ts: Any) -> Iterator[tuple[bytes, bytes]]:
        head, key_bytes, ns_bytes = kg.to_bytes(self.prefix, "big"), self.key.to_bytes(key), self.ns(ns)
        kind = self.spec.kind
        if kind == "PRIORITY_QUEUE":  # the value is the timer's timestamp
            yield head + timer_bytes(value, key_bytes, ns_bytes), b""
            return
        base = head + key_bytes + ns_bytes
        if kind == "LIST":
            stamps = ts if self.spec.ttl else [None] * len(value)
            parts = [self._value(v, t) for v, t in zip(value, stamps, strict=True)]
            if parts:
                yield base, bytes((LIST_DELIMITER,)).join(parts)
        elif kind == "MAP":
            assert self.user_key is not None
            for user_key, v in value.items():
                flag = b"\x01" if v is None and not self.spec.ttl else b"\x00"
                data = b"" if flag == b"\x01" else self._value(v, ts[user_key] if self.spec.ttl else None)
                yield base + self.user_key.to_bytes(user_key), flag + data
        elif value is not None:  # value, reducing and aggregating state: the value or accumulator
            yield base, self._value(value, ts)

    def encode(self, kg: int, columns: StateColumns) -> bytes:
        """The state's entries of key group ``kg`` as framed, sorted records, the last key
        flagged (empty without entries)."""
        if self.spec.carried:  # key bytes after the prefix, value bytes
            head = kg.to_bytes(self.prefix, "big")
            return _framed(sorted(zip([head + k for k in columns.keys], columns.values, strict=True)))
        namespaces = columns.namespaces
        void = namespaces is None or all(ns is None for ns in namespaces)
        if void and self.spec.namespace is not Namespace.VOID and columns.keys:
            raise SerializationError(
                f"state {self.spec.name} holds void namespaces, not {self.spec.namespace.name}"
            )
        if void and self._batch is not None:
            stamps = columns.timestamps if self.spec.ttl else None
            head = kg.to_bytes(self.prefix, "big")
            keys, values = columns.keys, columns.values
            block = encode_block(head, _VOID_NAMESPACE, keys, self._batch[0], values, self._batch[1], stamps)
            if block is not None:
                return block
        return _framed(self.pairs(kg, columns))

    def pairs(self, kg: int, columns: StateColumns) -> list[tuple[bytes, bytes]]:
        """The per-value path of :meth:`encode`: sorted (key, value) bytes."""
        namespaces = columns.namespaces
        out: list[tuple[bytes, bytes]] = []
        n = len(columns.keys)
        stamps = columns.timestamps if columns.timestamps is not None else [None] * n
        for k, ns, v, ts in zip(columns.keys, namespaces or [None] * n, columns.values, stamps, strict=True):
            try:
                out.extend(self._entries(kg, k, ns, v, ts))
            except (SerializationError, TypeError, ValueError, OverflowError, struct.error) as exc:
                scope = f"key {k!r}" if ns is None else f"key {k!r}, namespace {ns!r}"
                raise SerializationError(
                    f"state {self.spec.name}, {scope} (key group {kg}): cannot write "
                    f"{v!r} as Flink's {self.spec.kind} of {self.spec.value}: {exc}"
                ) from exc
        out.sort()
        return out


def _framed(pairs: Sequence[tuple[bytes, bytes]]) -> bytes:
    """``int length, key, int length, value`` records, the last key's first byte flagged."""
    if not pairs:
        return b""
    pack = _I32.pack
    *head, (key, value) = pairs
    last = bytes((key[0] | _META_FLAG,)) + key[1:]
    return b"".join(
        [pack(len(k)) + k + pack(len(v)) + v for k, v in head]
        + [pack(len(key)), last, pack(len(value)), value]
    )


def write_key_group(out: Output, entries: Sequence[tuple[int, bytes]]) -> None:
    """One key group's block: ``entries`` holds (state id, framed records) for each state
    with entries."""
    for i, (state_id, block) in enumerate(entries):
        if i == 0:
            out.u16(state_id, "state id")
        out.raw(block)
        following = entries[i + 1][0] if i + 1 < len(entries) else END_OF_GROUP
        out.u16(following, "state id")


def keyed_stream(
    where: str,
    key: TypeInformation,
    states: Sequence[KeyedStateSpec],
    key_groups: range,
    max_parallelism: int,
    columns: Mapping[int, Sequence[StateColumns | None]],
    flink: FlinkTarget,
    key_serializer: Snapshot | VerbatimSnapshot | None = None,
) -> tuple[bytes, list[int]]:
    """(the stream, one offset per key group of ``key_groups``) for release ``flink``. ``columns``
    maps a key group to each state's entries there (by state index; None or absent: no entries);
    ``key_serializer``: the key's serializer snapshot (default: that of the atomic ``key``)."""
    out = Output(where)
    write_header(out, key_serializer or key_snapshot(key, "the key"), states, flink)
    encoders = [EntryEncoder(s, key, max_parallelism) for s in states]
    offsets: list[int] = []
    for kg in key_groups:
        found = columns.get(kg, ())
        entries = [
            (i, block) for i, c in enumerate(found) if c is not None and (block := encoders[i].encode(kg, c))
        ]
        offsets.append(len(out) if entries else 0)
        write_key_group(out, entries)
    return bytes(out.buf), offsets
