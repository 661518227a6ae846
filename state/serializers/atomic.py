"""Serializers of atomic types in Flink's formats: numbers, strings, bytes, decimals, times, pickles."""

from __future__ import annotations

import copy as _copy
import datetime
import decimal
import operator
import pickle
import struct
from typing import Any

from ..errors import SerializationError
from .base import EPOCH, EPOCH_UTC, INT32, INT64, MILLISECOND, SECOND, TypeSerializer, take


class FixedSerializer(TypeSerializer):
    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self._struct = struct.Struct(fmt)

    def write(self, value: Any, out: bytearray) -> None:
        out += self._struct.pack(value)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        return self._struct.unpack_from(buf, pos)[0], pos + self._struct.size


class IntSerializer(FixedSerializer):
    """Any integer but a bool (``np.int64``, an ``IntEnum``: what ``__index__`` gives),
    never a float: a fraction is refused, not truncated."""

    def write(self, value: Any, out: bytearray) -> None:
        if type(value) is not int:
            if isinstance(value, bool) or not hasattr(type(value), "__index__"):
                raise SerializationError(f"expected an int, got {type(value).__name__} {value!r}")
            value = operator.index(value)
        out += self._struct.pack(value)


_CANONICAL_NAN = {">f": b"\x7f\xc0\x00\x00", ">d": b"\x7f\xf8" + bytes(6)}
_TIME_CLASSES: dict[str, type] = {
    "SQL_DATE": datetime.date,
    "SQL_TIME": datetime.time,
    "SQL_TIMESTAMP": datetime.datetime,
    "INSTANT": datetime.datetime,
}


def _check_time_class(name: str, value: object) -> None:
    cls = _TIME_CLASSES[name]
    if not isinstance(value, cls) or (name == "SQL_DATE" and isinstance(value, datetime.datetime)):
        raise SerializationError(f"expected a datetime.{cls.__name__} for {name}, got {type(value).__name__}")


class FloatSerializer(FixedSerializer):
    """FLOAT / DOUBLE: IEEE 754 big-endian; every NaN is written as Java's canonical NaN
    (``floatToIntBits`` / ``doubleToLongBits``), so equal keys have equal bytes."""

    def __init__(self, fmt: str) -> None:
        super().__init__(fmt)
        self._nan = _CANONICAL_NAN[fmt]

    def write(self, value: Any, out: bytearray) -> None:
        if type(value) is bool or not isinstance(value, (int, float)):
            raise SerializationError(f"expected a float, got {type(value).__name__} {value!r}")
        if value != value:  # NaN, whatever its sign and payload
            out += self._nan
        else:
            out += self._struct.pack(value)


class BoolSerializer(TypeSerializer):
    def write(self, value: Any, out: bytearray) -> None:
        if not isinstance(value, bool):
            raise SerializationError(f"expected a bool, got {type(value).__name__} {value!r}")
        out.append(1 if value else 0)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        return buf[pos] != 0, pos + 1


class CharSerializer(TypeSerializer):
    def write(self, value: Any, out: bytearray) -> None:
        if not isinstance(value, str) or len(value) != 1 or ord(value) > 0xFFFF:
            raise SerializationError(f"expected one UTF-16 character, got {value!r}")
        out += ord(value).to_bytes(2, "big")

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        raw, pos = take(buf, pos, 2, "CHAR")
        return chr(int.from_bytes(raw, "big")), pos


def _write_varint(n: int, out: bytearray) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


class StringSerializer(TypeSerializer):
    """Flink's StringValue format: varint(length + 1), then each UTF-16 unit as a varint.

    With ``nullable`` (Flink's ``String[]`` elements), ``None`` is the length varint 0.
    """

    def __init__(self, nullable: bool = False) -> None:
        self.nullable = nullable

    def write(self, value: Any, out: bytearray) -> None:
        if value is None and self.nullable:
            out.append(0)
            return
        if not isinstance(value, str):
            raise SerializationError(f"expected a str, got {type(value).__name__} {value!r}")
        if value.isascii():
            _write_varint(len(value) + 1, out)
            out += value.encode("ascii")
            return
        units = value.encode("utf-16-be", "surrogatepass")
        _write_varint(len(units) // 2 + 1, out)
        for i in range(0, len(units), 2):
            _write_varint((units[i] << 8) | units[i + 1], out)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        n, pos = _read_varint(buf, pos)
        if n == 0:
            if self.nullable:
                return None, pos
            raise SerializationError("null string where a value is required")
        n -= 1
        end = pos + n
        chunk = buf[pos:end]
        if len(chunk) == n and chunk.isascii():
            return chunk.decode("ascii"), end
        units = bytearray()
        for _ in range(n):
            c, pos = _read_varint(buf, pos)
            if c > 0xFFFF:
                raise SerializationError(f"a string character {c:#x} is not a UTF-16 unit")
            units += c.to_bytes(2, "big")
        return units.decode("utf-16-be", "surrogatepass"), pos


class BytesSerializer(TypeSerializer):
    """``byte[]``: int length, then the bytes."""

    def write(self, value: Any, out: bytearray) -> None:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise SerializationError(f"expected bytes, got {type(value).__name__}")
        out += INT32.pack(len(value))
        out += value

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        (n,) = INT32.unpack_from(buf, pos)
        return take(buf, pos + 4, n, "byte array")

    def copy(self, value: Any) -> Any:
        return value if isinstance(value, bytes) else bytes(value)


class PickleSerializer(BytesSerializer):
    """PICKLED_BYTE_ARRAY: the pickle, framed as ``byte[]``."""

    immutable = False

    def write(self, value: Any, out: bytearray) -> None:
        try:
            data = pickle.dumps(value, protocol=4)
        except Exception as exc:  # pickling runs arbitrary __reduce__ code
            raise SerializationError(f"cannot pickle {value!r}: {exc}") from exc
        super().write(data, out)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        data, pos = super().read(buf, pos)
        try:
            return pickle.loads(data), pos
        except Exception as exc:  # unpickling runs arbitrary code and can fail in any way
            raise SerializationError(f"cannot unpickle {len(data)} bytes: {exc}") from exc

    def copy(self, value: Any) -> Any:
        return _copy.deepcopy(value)


class BigDecSerializer(TypeSerializer):
    """BigDecimal: the unscaled BigInteger, then the int scale.

    BigInteger: int ``length + 4``, then the minimal two's-complement bytes; lengths 1, 2, 3
    are Flink's short forms of 0, 1 and 10 (0 is null). Decimals keep their exponent
    (``Decimal("1.50")`` reads back as ``1.50``) and every digit (no context rounding).
    """

    def write(self, value: Any, out: bytearray) -> None:
        if isinstance(value, bool) or not isinstance(value, (decimal.Decimal, int)):
            raise SerializationError(f"expected a decimal.Decimal, got {type(value).__name__} {value!r}")
        sign, digits, exponent = decimal.Decimal(value).as_tuple()
        if not isinstance(exponent, int):
            raise SerializationError(f"cannot store {value!r} as BIG_DEC")
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        # Java's BigInteger.toByteArray: bitLength() (which excludes the sign bit) / 8 + 1.
        java_bit_length = (unscaled if unscaled >= 0 else ~unscaled).bit_length()
        raw = unscaled.to_bytes(java_bit_length // 8 + 1, "big", signed=True)
        out += INT32.pack(len(raw) + 4)
        out += raw
        out += INT32.pack(-exponent)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        (n,) = INT32.unpack_from(buf, pos)
        pos += 4
        small = {1: 0, 2: 1, 3: 10}
        if n in small:
            unscaled = small[n]
        elif n == 0:
            raise SerializationError("null BIG_DEC where a value is required")
        elif n == 4:
            raise SerializationError("a BIG_DEC with a zero-length unscaled value")
        else:
            raw, pos = take(buf, pos, n - 4, "BIG_DEC")
            unscaled = int.from_bytes(raw, "big", signed=True)
        (scale,) = INT32.unpack_from(buf, pos)
        digits = tuple(int(d) for d in str(abs(unscaled)))
        return decimal.Decimal((unscaled < 0, digits, -scale)), pos + 4


class TimeSerializer(TypeSerializer):
    """SQL_DATE / SQL_TIME (long millis), SQL_TIMESTAMP (long millis, int nanos), INSTANT."""

    def __init__(self, name: str) -> None:
        self._name = name

    def write(self, value: Any, out: bytearray) -> None:
        name = self._name
        _check_time_class(name, value)
        if name == "SQL_DATE":
            out += INT64.pack((value - datetime.date(1970, 1, 1)).days * 86_400_000)
        elif name == "SQL_TIME":
            ms = ((value.hour * 60 + value.minute) * 60 + value.second) * 1000
            out += INT64.pack(ms + value.microsecond // 1000)
        elif name == "SQL_TIMESTAMP":
            # java.sql.Timestamp: getTime() (epoch millis), then getNanos() -- the whole
            # fraction of the second, not the part below the millisecond. Aware datetimes
            # are converted to UTC first (as PyFlink does).
            if value.tzinfo is not None:
                value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
            out += INT64.pack((value - EPOCH) // MILLISECOND)
            out += INT32.pack(value.microsecond * 1000)
        else:
            delta = value - EPOCH_UTC
            seconds = delta.days * 86400 + delta.seconds
            out += INT64.pack(seconds)
            out += INT32.pack(delta.microseconds * 1000)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        (v,) = INT64.unpack_from(buf, pos)
        pos += 8
        name = self._name
        if name == "SQL_DATE":
            return datetime.date(1970, 1, 1) + datetime.timedelta(days=v // 86_400_000), pos
        if name == "SQL_TIME":
            return (EPOCH + v * MILLISECOND).time(), pos
        (nanos,) = INT32.unpack_from(buf, pos)
        pos += 4
        if not 0 <= nanos < 1_000_000_000:
            raise SerializationError(f"{name} nanoseconds out of range: {nanos}")
        if name == "SQL_TIMESTAMP":
            seconds = v // 1000  # Timestamp(millis) floors to the second, setNanos replaces
            return EPOCH + seconds * SECOND + datetime.timedelta(microseconds=nanos // 1000), pos
        return EPOCH_UTC + datetime.timedelta(seconds=v, microseconds=nanos // 1000), pos
