"""A big-endian cursor over Java ``DataOutputStream`` bytes, with typed errors.

Every read checks its bounds; a short or malformed input raises
:class:`~flinkstate.checkpoint.errors.CheckpointCorruptError` naming the file, what was
being read and the byte offset.
"""

from __future__ import annotations

import struct
from typing import Any

from flinkstate.state.errors import SerializationError
from flinkstate.state.serializers.base import TypeSerializer

from ..errors import FlinkFormatError

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Cursor:
    """Reads ``buf`` from ``pos``; ``where`` names the file (and state) in error messages."""

    __slots__ = ("buf", "pos", "where")

    def __init__(self, buf: bytes, where: str, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos
        self.where = where
        if not 0 <= pos <= len(buf):  # a negative one would read from the end
            raise self.fail(f"position outside the {len(buf)} bytes")

    def fail(self, message: str, at: int | None = None) -> FlinkFormatError:
        offset = self.pos if at is None else at
        return FlinkFormatError(f"{self.where}: {message} at byte offset {offset}")

    def take(self, n: int, what: str) -> bytes:
        if n < 0:
            raise self.fail(f"negative length {n} of {what}")
        end = self.pos + n
        if end > len(self.buf):
            raise self.fail(f"truncated {what}: needs {n} bytes, {len(self.buf) - self.pos} left")
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def _unpack(self, s: struct.Struct, what: str) -> int:
        if self.pos + s.size > len(self.buf):
            raise self.fail(f"truncated {what}: needs {s.size} bytes, {len(self.buf) - self.pos} left")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return int(v)

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def boolean(self, what: str) -> bool:
        v = self.u8(what)
        if v > 1:
            raise self.fail(f"{what}: boolean byte {v}", self.pos - 1)
        return v == 1

    def i16(self, what: str) -> int:
        return self._unpack(_I16, what)

    def u16(self, what: str) -> int:
        return self._unpack(_U16, what)

    def i32(self, what: str) -> int:
        return self._unpack(_I32, what)

    def i64(self, what: str) -> int:
        return self._unpack(_I64, what)

    def count(self, what: str, min_width: int = 1) -> int:
        """A non-negative int count whose entries (``min_width`` bytes each) fit in what is left."""
        at = self.pos
        n = self.i32(what)
        if n < 0 or n * min_width > len(self.buf) - self.pos:
            raise self.fail(f"implausible {what} {n}", at)
        return n

    def utf(self, what: str) -> str:
        """Java ``writeUTF``: an unsigned 16-bit length, then modified UTF-8."""
        n = self.u16(what)
        at = self.pos
        raw = self.take(n, what)
        try:
            text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
            return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{what} is not modified UTF-8", at) from exc

    def expect_int(self, value: int, what: str) -> None:
        at = self.pos
        got = self.i32(what)
        if got != value:
            raise self.fail(f"{what} {got:#x}, expected {value:#x}", at)

    def value(self, serializer: TypeSerializer, what: str) -> Any:
        """One value of ``serializer`` (:meth:`TypeSerializer.read_at`: checked bounds)."""
        try:
            value, self.pos = serializer.read_at(self.buf, self.pos)
        except SerializationError as exc:
            raise self.fail(f"{what}: {exc}") from exc
        return value

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)
