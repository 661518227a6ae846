"""The serializer base class and the byte-level helpers every serializer uses."""

from __future__ import annotations

import datetime
import pickle
import struct
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence, Set
from typing import Any

from ..errors import SerializationError

INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
EPOCH = datetime.datetime(1970, 1, 1)
EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
MILLISECOND = datetime.timedelta(milliseconds=1)
SECOND = datetime.timedelta(seconds=1)

# What a failed write or read may raise besides SerializationError: struct/int range errors,
# wrong Python types, decimal and datetime arithmetic (ArithmeticError covers OverflowError
# and decimal's signals), pickle and Arrow failures.
_WRITE_ERRORS = (
    struct.error,
    TypeError,
    ValueError,
    ArithmeticError,
    AttributeError,
    pickle.PicklingError,
)
_READ_ERRORS = (
    struct.error,
    IndexError,
    ValueError,
    ArithmeticError,
    TypeError,
    EOFError,
    pickle.UnpicklingError,
)


def take(buf: bytes, pos: int, n: int, what: str) -> tuple[bytes, int]:
    """``n`` bytes at ``pos`` (and the position after them); a negative or short run is an error."""
    if n < 0:
        raise SerializationError(f"negative {what} length {n}")
    end = pos + n
    if end > len(buf):
        raise SerializationError(f"truncated {what}: needs {n} bytes, {len(buf) - pos} left")
    return bytes(buf[pos:end]), end


def read_size(buf: bytes, pos: int, what: str, min_width: int) -> tuple[int, int]:
    (n,) = INT32.unpack_from(buf, pos)
    if n < 0:
        raise SerializationError(f"negative {what} size {n}")
    pos += 4
    if n * min_width > len(buf) - pos:
        raise SerializationError(f"truncated {what}: {n} entries cannot fit in {len(buf) - pos} bytes")
    return n, pos


def as_sequence(value: Any, what: str) -> Sequence[Any]:
    """``value`` if it is an ordered sequence (list, tuple, ...), not a str, bytes, dict or set."""
    if isinstance(value, (str, bytes, bytearray, memoryview, Mapping, Set)) or not isinstance(
        value, Sequence
    ):
        raise SerializationError(f"expected a list or tuple for {what}, got {value!r}")
    return value


class TypeSerializer(ABC):
    """Writes and reads values of one type in Flink's binary format."""

    immutable = True
    #: A lower bound of the size of one value in bytes (sizes read from corrupt input are
    #: checked against it before anything is allocated).
    min_width = 1

    @abstractmethod
    def write(self, value: Any, out: bytearray) -> None:
        """Append the bytes of ``value`` to ``out``."""

    @abstractmethod
    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        """Read one value at ``pos``; return it and the position after it."""

    def copy(self, value: Any) -> Any:
        """A copy that shares nothing mutable with ``value``."""
        return value

    def to_bytes(self, value: Any) -> bytes:
        out = bytearray()
        try:
            self.write(value, out)
        except SerializationError:
            raise
        except _WRITE_ERRORS as exc:
            raise SerializationError(f"cannot serialize {value!r} with {self}: {exc}") from exc
        return bytes(out)

    def from_bytes(self, data: bytes | bytearray | memoryview) -> Any:
        if not isinstance(data, bytes):
            try:
                data = bytes(data)
            except TypeError as exc:
                raise SerializationError(f"expected bytes, got {type(data).__name__}") from exc
        value, pos = self.read_at(data, 0)
        if pos != len(data):
            raise SerializationError(f"{len(data) - pos} trailing bytes after a value of {self}")
        return value

    def read_at(self, buf: bytes, pos: int) -> tuple[Any, int]:
        """:meth:`read` of untrusted bytes: a position outside ``buf`` and a short or malformed
        value (whatever the parsing raised) are a :class:`SerializationError`."""
        if not 0 <= pos <= len(buf):
            raise SerializationError(f"a value of {self} at byte {pos}, outside the {len(buf)} bytes")
        try:
            value, end = self.read(buf, pos)
        except SerializationError:
            raise
        except _READ_ERRORS as exc:
            raise SerializationError(f"cannot deserialize a value of {self} at byte {pos}: {exc}") from exc
        if end > len(buf):
            raise SerializationError(f"truncated value of {self}: {len(buf)} bytes, {end} needed")
        return value, end

    def __repr__(self) -> str:
        return type(self).__name__
