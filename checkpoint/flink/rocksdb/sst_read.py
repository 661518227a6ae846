"""A reader of RocksDB's block-based table (SST) files, written from RocksDB's format docs.

A file ends in a footer (checksum type, metaindex and index block handles or, from
format_version 6, the metaindex size, format_version, magic number); format_version 0's
legacy footer (FRocksDB 5.17: Flink 1.13) is the two handles and another magic number, its
checksums crc32c. Before format_version 2, zlib blocks carry no decompressed size. Every block is
followed by a compression type byte and a 32-bit checksum of the block and that byte. A
block holds prefix-compressed entries (``varint shared, varint non_shared, varint value
length, key suffix, value``), then restart offsets and their count. Data block keys are
internal keys: the user key, then 8 little-endian bytes ``sequence << 8 | type``. The
metaindex names the properties block (column family, comparator, index layout) and the
range deletions block. Every malformed byte raises :class:`FlinkFormatError` naming the
file and the byte offset.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain

import cramjam

from ..errors import FlinkFormatError, UnsupportedFlinkFeatureError
from .checksums import block_checksum

MAGIC = 0x88E241B785F4CFF7
LEGACY_MAGIC = 0xDB4775248B80FB57
_FOOTER, _LEGACY_FOOTER = 53, 48
_CRC32C = 1
_TRAILER = 5
_M32 = (1 << 32) - 1
_HASH_BIT, _SEPARATED_BIT, _UNIFORM_BIT = 1 << 31, 1 << 28, 1 << 29
_COMPRESSIONS = {0: "none", 1: "snappy", 2: "zlib", 3: "bzip2", 4: "lz4", 5: "lz4hc", 7: "zstd"}
#: Value types found in SST data blocks.
DELETION, VALUE, MERGE, SINGLE_DELETION, RANGE_DELETION = 0x0, 0x1, 0x2, 0x7, 0xF
_KNOWN_TYPES = {DELETION, VALUE, MERGE, SINGLE_DELETION}


def varint(buf: bytes, pos: int, where: str, at: int) -> tuple[int, int]:
    """A little-endian base-128 varint at ``buf[pos]``; ``at`` is the block's file offset."""
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise FlinkFormatError(f"{where}: truncated or overlong varint at byte offset {at + pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


@dataclass(frozen=True)
class Handle:
    offset: int
    size: int


@dataclass
class SstTable:
    """One SST file: its footer, properties and (lazily) its entries."""

    data: bytes
    where: str
    format_version: int = 0
    footer_size: int = _FOOTER
    checksum: int = 0
    context: int = 0
    index: Handle | None = None
    meta: dict[str, Handle] = field(default_factory=dict)
    properties: dict[str, bytes] = field(default_factory=dict)
    global_seqno: int | None = None

    @property
    def column_family(self) -> str:
        return self.properties.get("rocksdb.column.family.name", b"").decode("utf-8", "replace")

    def number(self, name: str) -> int:
        """A varint-valued property (0 when absent)."""
        raw = self.properties.get(name)
        return 0 if raw is None else varint(raw, 0, f"{self.where}: property {name}", 0)[0]

    @property
    def index_type(self) -> int:
        """0 binary search, 1 hash, 2 partitioned (two-level), 3 binary search with first keys."""
        return int.from_bytes(
            self.properties.get("rocksdb.block.based.table.index.type", bytes(4))[:4], "little"
        )

    def fail(self, message: str, at: int) -> FlinkFormatError:
        return FlinkFormatError(f"{self.where}: {message} at byte offset {at}")

    def block(self, h: Handle, what: str) -> bytes:
        """The checked, decompressed contents of the block at ``h``."""
        end = h.offset + h.size + _TRAILER
        if h.offset < 0 or end > len(self.data) - self.footer_size:
            raise self.fail(f"{what} block (size {h.size}) runs past the end of the file", h.offset)
        raw = self.data[h.offset : h.offset + h.size]
        kind = self.data[h.offset + h.size]
        if self.checksum:
            expected = block_checksum(self.checksum, raw, kind)
            assert expected is not None
            if self.context:
                expected = (expected + _context(self.context, h.offset)) & _M32
            stored = int.from_bytes(self.data[h.offset + h.size + 1 : end], "little")
            if stored != expected:
                raise self.fail(f"{what} block checksum mismatch", h.offset)
        return self._decompress(kind, raw, h, what)

    def _decompress(self, kind: int, raw: bytes, h: Handle, what: str) -> bytes:
        if kind == 0:
            return raw
        name = _COMPRESSIONS.get(kind)
        if name is None:
            raise UnsupportedFlinkFeatureError(
                f"{self.where}: {what} block uses compression type {kind}, which cannot be read, "
                f"at byte offset {h.offset}"
            )
        if self.format_version < 2 and name not in ("snappy", "zlib"):
            raise UnsupportedFlinkFeatureError(
                f"{self.where}: {what} block uses {name} compression of SST format_version "
                f"{self.format_version}, which cannot be read, at byte offset {h.offset}"
            )
        try:
            if name == "snappy":
                return bytes(cramjam.snappy.decompress_raw(raw))
            if self.format_version < 2:  # zlib, without the decompressed size
                return zlib.decompress(raw, -15)
            size, pos = varint(raw, 0, self.where, h.offset)
            body = raw[pos:]
            if name == "zlib":
                out = zlib.decompress(body, -15)
            elif name == "bzip2":
                out = bytes(cramjam.bzip2.decompress(body))
            elif name == "zstd":
                out = bytes(cramjam.zstd.decompress(body, output_len=size))
            else:
                out = bytes(cramjam.lz4.decompress_block(body, output_len=size))
        except (cramjam.DecompressionError, zlib.error, ValueError) as exc:
            raise self.fail(f"{what} block does not decompress ({name}: {exc})", h.offset) from exc
        if len(out) != size:
            raise self.fail(f"{what} block decompresses to {len(out)} bytes, not {size}", h.offset)
        return out


def _context(base: int, offset: int) -> int:
    return base ^ (((offset & _M32) + (offset >> 32)) & _M32)


def entries(block: bytes, where: str, at: int) -> Iterator[tuple[bytes, int, int]]:
    """Each entry of a block (``at``: its file offset): its full key, where its value starts and ends."""
    limit = _restarts_start(block, where, at)
    pos, key = 0, b""
    while pos < limit:
        start = pos
        if pos + 3 <= limit and (block[pos] | block[pos + 1] | block[pos + 2]) < 0x80:
            shared, non_shared, value_len = block[pos], block[pos + 1], block[pos + 2]
            pos += 3
        else:
            shared, pos = varint(block, pos, where, at)
            non_shared, pos = varint(block, pos, where, at)
            value_len, pos = varint(block, pos, where, at)
        if shared > len(key) or pos + non_shared > limit:
            raise FlinkFormatError(f"{where}: bad block entry at byte offset {at + start}")
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        end = pos + value_len
        if end > limit:
            raise FlinkFormatError(
                f"{where}: block entry value runs past the entries at byte offset {at + start}"
            )
        yield key, pos, end
        pos = end


def _restarts_start(block: bytes, where: str, at: int) -> int:
    n = len(block)
    if n < 4:
        raise FlinkFormatError(f"{where}: block of {n} bytes has no restart count at byte offset {at}")
    packed = int.from_bytes(block[n - 4 :], "little")
    if packed & _SEPARATED_BIT:
        raise UnsupportedFlinkFeatureError(
            f"{where}: block stores keys and values separately, which cannot be read, at byte offset {at}"
        )
    end = n - 4
    if packed & _HASH_BIT:
        if n < 6:
            raise FlinkFormatError(f"{where}: block hash index is truncated at byte offset {at}")
        end -= 2 + int.from_bytes(block[n - 6 : n - 4], "little")
    restarts = packed & ~(_HASH_BIT | _UNIFORM_BIT)
    start = end - 4 * restarts
    if restarts == 0 or start < 0:
        raise FlinkFormatError(
            f"{where}: block restart array ({restarts} restarts) is malformed at byte offset {at}"
        )
    return start


def _handle(buf: bytes, pos: int, where: str, at: int) -> tuple[Handle, int]:
    offset, pos = varint(buf, pos, where, at)
    size, pos = varint(buf, pos, where, at)
    return Handle(offset, size), pos


def open_table(data: bytes, where: str, largest_seqno: int | None = None) -> SstTable:
    """Parse the footer, metaindex and properties of an SST file's bytes (``largest_seqno``:
    the file's largest sequence number as the MANIFEST records it)."""
    t = SstTable(data, where)
    n = len(data)
    magic = int.from_bytes(data[n - 8 :], "little") if n >= _LEGACY_FOOTER else None
    if magic == LEGACY_MAGIC:
        t.footer_size, t.checksum = _LEGACY_FOOTER, _CRC32C
        footer = n - _LEGACY_FOOTER
        metaindex, pos = _handle(data, footer, where, 0)
        t.index, _ = _handle(data, pos, where, 0)
        return _read_meta(t, metaindex, largest_seqno)
    if n < _FOOTER or magic != MAGIC:
        raise t.fail("not a block-based RocksDB table (bad or missing magic number)", max(n - 8, 0))
    footer = n - _FOOTER
    t.format_version = int.from_bytes(data[n - 12 : n - 8], "little")
    t.checksum = data[footer]
    if not 1 <= t.format_version <= 6:
        raise UnsupportedFlinkFeatureError(
            f"{where}: SST format_version {t.format_version} cannot be read, at byte offset {n - 12}"
        )
    if t.checksum > 4:
        raise t.fail(f"unknown checksum type {t.checksum}", footer)
    if t.format_version >= 6:
        part = data[footer:]
        if part[1:5] != b"\x3e\x00\x7a\x00":
            raise t.fail("bad extended magic in the footer", footer + 1)
        stored = int.from_bytes(part[5:9], "little")
        t.context = int.from_bytes(part[9:13], "little")
        meta_size = int.from_bytes(part[13:17], "little")
        if t.checksum:
            computed = block_checksum(t.checksum, part[:5] + bytes(4) + part[9:-1], part[-1])
            assert computed is not None
            if (computed + _context(t.context, footer)) & _M32 != stored:
                raise t.fail("footer checksum mismatch", footer)
        metaindex = Handle(footer - _TRAILER - meta_size, meta_size)
    else:
        metaindex, pos = _handle(data, footer + 1, where, 0)
        t.index, _ = _handle(data, pos, where, 0)
    return _read_meta(t, metaindex, largest_seqno)


def _read_meta(t: SstTable, metaindex: Handle, largest_seqno: int | None) -> SstTable:
    """``t`` with its metaindex, properties and sequence number read (the footer read)."""
    where = t.where
    block = t.block(metaindex, "metaindex")
    for name, start, end in entries(block, where, metaindex.offset):
        t.meta[name.decode("utf-8", "replace")] = _handle(block[start:end], 0, where, metaindex.offset)[0]
    if t.index is None:
        t.index = t.meta.get("rocksdb.index")
    props = t.meta.get("rocksdb.properties")
    if props is None or t.index is None:
        raise t.fail("metaindex names no properties or index block", metaindex.offset)
    block = t.block(props, "properties")
    for name, start, end in entries(block, where, props.offset):
        t.properties[name.decode("utf-8", "replace")] = block[start:end]
    comparator = t.properties.get("rocksdb.comparator", b"leveldb.BytewiseComparator")
    if comparator != b"leveldb.BytewiseComparator":
        raise UnsupportedFlinkFeatureError(
            f"{where}: SST keys are ordered by {comparator.decode()}, not bytewise"
        )
    external = t.properties.get("rocksdb.external_sst_file.version")
    if external is not None and int.from_bytes(external[:4], "little") >= 2:
        # An ingested file: every entry has the file's global sequence number, from its
        # properties or else the largest sequence number the MANIFEST records for it.
        stored = int.from_bytes(
            t.properties.get("rocksdb.external_sst_file.global_seqno", bytes(8)), "little"
        )
        if not stored and largest_seqno is None:
            raise UnsupportedFlinkFeatureError(
                f"{where}: an ingested SST file whose sequence number only the MANIFEST holds"
            )
        t.global_seqno = stored or largest_seqno
    if "rocksdb.compression_dict" in t.meta:
        raise UnsupportedFlinkFeatureError(f"{where}: SST blocks use a compression dictionary")
    return t


#: User-key ranges ``[low, high)`` (``high`` None: unbounded) a read needs; None: every key.
Ranges = list[tuple[bytes, bytes | None]] | None


def overlaps(low: bytes | None, high: bytes, ranges: Ranges) -> bool:
    """Whether keys from ``low`` (None: the first key) to ``high`` can fall in ``ranges``."""
    return ranges is None or any(high >= a and (b is None or low is None or low < b) for a, b in ranges)


def _index_handles(t: SstTable, h: Handle, what: str, ranges: Ranges) -> list[Handle]:
    """The handles an index block lists whose key span can overlap ``ranges``. Index keys
    separate blocks: every key of a block is at most its index key and at least the previous
    index key."""
    block = t.block(h, what)
    delta = t.number("rocksdb.index.value.is.delta.encoded") != 0
    cut = 0 if t.number("rocksdb.index.key.is.user.key") else 8
    first_key = t.index_type == 3
    out: list[Handle] = []
    limit = _restarts_start(block, t.where, h.offset)
    pos, prev, key, low = 0, None, b"", None
    # With delta encoding the entry header has no value length and a value whose key shares
    # bytes with the previous key is only the size change of the block.
    while pos < limit:
        start = pos
        shared, pos = varint(block, pos, t.where, h.offset)
        non_shared, pos = varint(block, pos, t.where, h.offset)
        if not delta:
            _, pos = varint(block, pos, t.where, h.offset)
        if shared > len(key) or pos + non_shared > limit:
            raise t.fail(f"bad {what} entry", h.offset + start)
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        if delta and shared and prev is not None:
            raw, pos = varint(block, pos, t.where, h.offset)
            change = (raw >> 1) ^ -(raw & 1)
            handle = Handle(prev.offset + prev.size + _TRAILER, prev.size + change)
        else:
            handle, pos = _handle(block, pos, t.where, h.offset)
        if first_key:
            length, pos = varint(block, pos, t.where, h.offset)
            pos += length
        if pos > limit:
            raise t.fail(f"bad {what} entry", h.offset + start)
        high = key[: len(key) - cut]
        if overlaps(low, high, ranges):
            out.append(handle)
        prev, low = handle, high
    return out


def data_blocks(t: SstTable, ranges: Ranges = None) -> list[Handle]:
    """The handles of the data blocks (only those that can hold keys in ``ranges``), in key order."""
    if t.index_type not in (0, 1, 2, 3):
        raise UnsupportedFlinkFeatureError(f"{t.where}: SST index type {t.index_type} cannot be read")
    assert t.index is not None
    top = _index_handles(t, t.index, "index", ranges)
    if t.index_type != 2:
        return top
    return [d for part in top for d in _index_handles(t, part, "index partition", ranges)]


def scan(t: SstTable, ranges: Ranges = None) -> Iterator[tuple[bytes, int, int, bytes]]:
    """Every entry in key order (of the blocks that can hold ``ranges``): user key, sequence
    number, value type, value."""
    return chain.from_iterable(_data_block(t, h) for h in data_blocks(t, ranges))


def _data_block(t: SstTable, h: Handle) -> list[tuple[bytes, int, int, bytes]]:
    """The entries of one data block (one tight loop: this is where native reads spend their time)."""
    block = t.block(h, "data")
    limit = _restarts_start(block, t.where, h.offset)
    out = []
    from_bytes = int.from_bytes
    pos, key = 0, b""
    while pos < limit:
        start = pos
        # The restart array follows ``limit``, so three header bytes can always be read.
        shared, non_shared, value_len = block[pos], block[pos + 1], block[pos + 2]
        if (shared | non_shared | value_len) < 0x80:
            pos += 3
        else:
            shared, pos = varint(block, pos, t.where, h.offset)
            non_shared, pos = varint(block, pos, t.where, h.offset)
            value_len, pos = varint(block, pos, t.where, h.offset)
        end = pos + non_shared + value_len
        if shared > len(key) or end > limit or shared + non_shared < 8:
            raise t.fail("bad data block entry", h.offset + start)
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        kind = key[-8]
        if kind not in _KNOWN_TYPES:
            raise UnsupportedFlinkFeatureError(
                f"{t.where}: value type {kind:#x} (blob, wide-column or timed entries) cannot be read, "
                f"in the data block at byte offset {h.offset}"
            )
        out.append((key[:-8], from_bytes(key[-7:], "little"), kind, block[pos:end]))
        pos = end
    if t.global_seqno is not None:
        return [(key, t.global_seqno, kind, value) for key, _, kind, value in out]
    return out


def range_deletions(t: SstTable) -> list[tuple[bytes, bytes, int]]:
    """The range tombstones: start user key, end user key (exclusive), sequence number."""
    h = t.meta.get("rocksdb.range_del")
    if h is None:
        return []
    block = t.block(h, "range deletion")
    out = []
    for ikey, start, end in entries(block, t.where, h.offset):
        if len(ikey) < 8 or ikey[-8] != RANGE_DELETION:
            raise t.fail("bad range tombstone key", h.offset)
        out.append((ikey[:-8], block[start:end], int.from_bytes(ikey[-8:], "little") >> 8))
    return out
