"""RocksDB's MANIFEST: which SST files are live in which column family, at which level.

``CURRENT`` names the MANIFEST. The MANIFEST is a log: 32 KiB blocks of records (masked
CRC32C, 16-bit length, type; a record split over blocks is sent in first, middle and last
fragments), each record one version edit: tagged fields adding and dropping column
families, adding files (level, number, size, smallest and largest keys and sequence
numbers) and deleting them. Tags RocksDB marks as safe to ignore carry their length.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import FlinkFormatError, UnsupportedFlinkFeatureError
from .checksums import masked_crc32c
from .sst_read import varint

_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_RECYCLABLE = {5: _FULL, 6: _FIRST, 7: _MIDDLE, 8: _LAST}
_SAFE_IGNORE = 1 << 13
# Tags after the safe-ignore mask that predate its length-prefix rule.
_UNPREFIXED = {_SAFE_IGNORE + 2: "blob file", _SAFE_IGNORE + 3: "blob file", _SAFE_IGNORE + 4: "WAL"}
_UNPREFIXED[_SAFE_IGNORE + 5] = "WAL"


@dataclass(frozen=True)
class LiveFile:
    number: int
    level: int
    smallest_seqno: int
    largest_seqno: int
    smallest_key: bytes = b""
    largest_key: bytes = b""

    @property
    def name(self) -> str:
        return f"{self.number:06d}.sst"


@dataclass
class Manifest:
    """Column family names by id and their live files."""

    families: dict[int, str] = field(default_factory=lambda: {0: "default"})
    files: dict[int, dict[int, LiveFile]] = field(default_factory=dict)

    def live(self, family: str) -> list[LiveFile]:
        """The live files of ``family``, newest first (level 0 by sequence, then by level)."""
        ids = [i for i, name in self.families.items() if name == family]
        found = [f for i in ids for f in self.files.get(i, {}).values()]
        return sorted(found, key=lambda f: (f.level, -f.largest_seqno if f.level == 0 else 0, -f.number))


def records(data: bytes, where: str) -> list[bytes]:
    """The records of a RocksDB log file, their checksums verified."""
    out: list[bytes] = []
    pending: bytearray | None = None
    pos = 0
    while pos < len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:
            pos += left
            continue
        if pos + 7 > len(data):
            raise FlinkFormatError(f"{where}: truncated log record header at byte offset {pos}")
        length = int.from_bytes(data[pos + 4 : pos + 6], "little")
        kind = data[pos + 6]
        if kind == 0 and length == 0:
            if any(data[pos:]):
                raise FlinkFormatError(f"{where}: empty log record before more data at byte offset {pos}")
            break  # preallocated space: the end of the log
        header = 11 if kind in _RECYCLABLE else 7
        end = pos + header + length
        if kind not in _RECYCLABLE and kind not in (_FULL, _FIRST, _MIDDLE, _LAST):
            raise UnsupportedFlinkFeatureError(f"{where}: log record type {kind} at byte offset {pos}")
        if end > len(data) or header + length > left:
            raise FlinkFormatError(f"{where}: truncated log record at byte offset {pos}")
        if masked_crc32c(data[pos + 6 : end]) != int.from_bytes(data[pos : pos + 4], "little"):
            raise FlinkFormatError(f"{where}: log record checksum mismatch at byte offset {pos}")
        kind = _RECYCLABLE.get(kind, kind)
        payload = data[pos + header : end]
        if kind == _FULL:
            out.append(payload)
        elif kind == _FIRST:
            pending = bytearray(payload)
        elif pending is None:
            raise FlinkFormatError(f"{where}: log record fragment without a first part at byte offset {pos}")
        else:
            pending += payload
            if kind == _LAST:
                out.append(bytes(pending))
                pending = None
        pos = end
    if pending is not None:
        raise FlinkFormatError(f"{where}: the last log record is incomplete at byte offset {len(data)}")
    return out


def parse_manifest(data: bytes, where: str) -> Manifest:
    """Replay every version edit of a MANIFEST."""
    m = Manifest()
    for i, record in enumerate(records(data, where)):
        _edit(m, record, f"{where}, version edit {i}")
    return m


class _Fields:
    """A cursor over one version edit."""

    def __init__(self, rec: bytes, where: str) -> None:
        self.rec, self.where, self.pos = rec, where, 0

    def varint(self) -> int:
        value, self.pos = varint(self.rec, self.pos, self.where, 0)
        return value

    def piece(self) -> bytes:
        n = self.varint()
        if self.pos + n > len(self.rec):
            raise FlinkFormatError(f"{self.where}: field runs past the record at byte offset {self.pos}")
        self.pos += n
        return self.rec[self.pos - n : self.pos]


def _edit(m: Manifest, rec: bytes, where: str) -> None:
    c = _Fields(rec, where)
    family, added, deleted, new_name, drop = 0, [], [], None, False
    while c.pos < len(rec):
        tag = c.varint()
        if tag in (2, 3, 4, 9, 10, 200, 203, 300):
            value = c.varint()
            if tag == 200:
                family = value
        elif tag in (1, 201):
            name = c.piece()
            if tag == 201:
                new_name = name.decode("utf-8", "replace")
        elif tag == 5:
            c.varint()
            c.piece()
        elif tag == 6:
            c.varint()
            deleted.append(c.varint())
        elif tag in (7, 100, 102, 103):
            added.append(_new_file(tag, c))
        elif tag == 202:
            drop = True
        elif tag in (400, 401) or tag in _UNPREFIXED:
            what = _UNPREFIXED.get(tag, "blob file")
            raise UnsupportedFlinkFeatureError(f"{where}: the MANIFEST records {what}s, which cannot be read")
        elif tag & _SAFE_IGNORE:
            c.piece()
        else:
            raise FlinkFormatError(f"{where}: unknown MANIFEST tag {tag} at byte offset {c.pos}")
    if new_name is not None:
        m.families[family] = new_name
    if drop:
        m.families.pop(family, None)
        m.files.pop(family, None)
        return
    files = m.files.setdefault(family, {})
    for number in deleted:
        files.pop(number, None)
    for live in added:
        files[live.number] = live


def _new_file(tag: int, c: _Fields) -> LiveFile:
    level, number = c.varint(), c.varint()
    if tag == 102:
        c.varint()  # path id
    c.varint()  # file size
    smallest_key, largest_key = c.piece()[:-8], c.piece()[:-8]  # user keys of internal keys
    smallest = largest = 0
    if tag != 7:
        smallest, largest = c.varint(), c.varint()
    while tag == 103 and c.varint() != 1:  # custom fields up to the terminating tag 1
        c.piece()
    return LiveFile(number, level, smallest, largest, smallest_key, largest_key)
