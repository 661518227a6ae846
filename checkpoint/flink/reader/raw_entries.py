"""The entries of a Flink savepoint's states as bytes, undecoded: what the savepoint writer
carries verbatim (:mod:`..writer.passthrough`).

In the canonical key/value layout (canonical savepoints of either backend, compressed or not,
and the SST files of native RocksDB ones) an entry's key bytes are the key-group prefix, then
the key, namespace and user key, and its value bytes stand alone: :class:`RawEntries` keeps each
entry's key bytes after the prefix and its value bytes. Operator list and union state elements
run from one offset ``_metadata`` records to the next (:func:`operator_elements`).
"""

from __future__ import annotations

from collections.abc import Iterable

from flinkstate.state.errors import SerializationError

from ..errors import FlinkFormatError, UnsupportedSerializerError
from ..metadata.metadata_read import OperatorHandle
from ..streams.header_read import KeyedHeader
from ..streams.keyed_read import KeyGroupDecoder, StateRows
from ..streams.operator_read import element_spans
from ..wire.snappy_read import snappy_block


class RawEntries(KeyGroupDecoder):
    """Collects the entries of states of one keyed state stream as bytes: per entry the key
    group, the key bytes after the key-group prefix (``key``) and the value bytes (``value``).
    The key serializer is never used: it may be one we cannot decode."""

    def __init__(self, header: KeyedHeader, max_parallelism: int, where: str, states: Iterable[str]) -> None:
        wanted = set(states)
        self.header = header
        self.where = where
        self.prefix = 1 if max_parallelism <= 128 else 2
        self.rows = {s.state_id: StateRows(s) for s in header.states if s.name in wanted}
        self.columnar = self.native = None

    def entry(self, rows: StateRows, kg: int, key_raw: bytes, value_raw: bytes, at: str) -> None:
        try:
            self._check_prefix(key_raw, kg)
        except SerializationError as exc:
            raise FlinkFormatError(
                f"{self.where}: state {rows.info.name}, key group {kg}: {exc} ({at})"
            ) from exc
        rows.key_group.append(kg)
        rows.key.append(key_raw[self.prefix :])
        rows.value.append(value_raw)

    def heap_checkpoint(self, buf: bytes, pos: int, kg: int) -> None:
        raise UnsupportedSerializerError(
            f"{self.where}: a heap checkpoint's entries are framed by their serializers and cannot be "
            "carried as bytes (write from a savepoint)"
        )


def operator_elements(
    data: bytes, compressed: bool, handle: OperatorHandle, name: str, where: str
) -> list[bytes]:
    """The bytes of each element of operator list or union state ``name`` in one subtask's
    stream (each runs to the next recorded offset); of a broadcast state, its whole map."""
    spans = element_spans(data, handle, name, where)
    return [snappy_block(data, s, e, where) if compressed else bytes(data[s:e]) for s, e in spans]
