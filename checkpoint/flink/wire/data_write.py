"""A big-endian writer of Java ``DataOutputStream`` bytes: the inverse of :class:`.data_read.Cursor`.

Every value is range-checked; one that Java's stream could not write (an int out of
range, a ``writeUTF`` string over 65,535 encoded bytes) raises
:class:`~flinkstate.state.errors.SerializationError` naming what was written.
"""

from __future__ import annotations

import struct

from flinkstate.state.errors import SerializationError

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def modified_utf8(text: str) -> bytes:
    """Java's modified UTF-8 (``writeUTF`` without its length): UTF-16 code units, NUL as
    two bytes, a supplementary character as its two surrogates of three bytes each."""
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    out = bytearray()
    for (code,) in _U16.iter_unpack(text.encode("utf-16-be", "surrogatepass")):
        if 0 < code < 0x80:
            out.append(code)
        elif code < 0x800:
            out += bytes((0xC0 | code >> 6, 0x80 | code & 0x3F))
        else:
            out += bytes((0xE0 | code >> 12, 0x80 | code >> 6 & 0x3F, 0x80 | code & 0x3F))
    return bytes(out)


class Output:
    """Appends to ``buf``; ``where`` names what is written in error messages."""

    __slots__ = ("buf", "where")

    def __init__(self, where: str) -> None:
        self.buf = bytearray()
        self.where = where

    def __len__(self) -> int:
        return len(self.buf)

    def _pack(self, s: struct.Struct, value: int, what: str) -> None:
        try:
            self.buf += s.pack(value)
        except struct.error as exc:
            raise SerializationError(f"{self.where}: {what} {value!r} does not fit {s.size} bytes") from exc

    def u8(self, value: int, what: str) -> None:
        if not 0 <= value <= 0xFF:
            raise SerializationError(f"{self.where}: {what} {value!r} does not fit a byte")
        self.buf.append(value)

    def boolean(self, value: bool) -> None:
        self.buf.append(1 if value else 0)

    def i16(self, value: int, what: str) -> None:
        self._pack(_I16, value, what)

    def u16(self, value: int, what: str) -> None:
        self._pack(_U16, value, what)

    def i32(self, value: int, what: str) -> None:
        self._pack(_I32, value, what)

    def i64(self, value: int, what: str) -> None:
        self._pack(_I64, value, what)

    def raw(self, data: bytes | bytearray) -> None:
        self.buf += data

    def utf(self, text: str, what: str) -> None:
        """Java ``writeUTF``: an unsigned 16-bit length, then modified UTF-8."""
        data = modified_utf8(text)
        if len(data) > 0xFFFF:
            raise SerializationError(f"{self.where}: {what} takes {len(data)} bytes; writeUTF holds 65535")
        self._pack(_U16, len(data), what)
        self.buf += data

    def sized(self, data: bytes | bytearray, what: str) -> None:
        """An int length, then ``data``."""
        self.i32(len(data), f"length of {what}")
        self.buf += data
