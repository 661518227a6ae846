"""Java ``hashCode()`` semantics and Flink's murmur finalizer, in pure Python.

These functions define the semantics; :mod:`._hashing` (an optional C
module) computes the same results faster, and :func:`key_group_assigner` picks it when
it is installed. Nothing here uses Python's salted ``hash()``.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ..errors import StateTypeError
from ..serializers.lookup import serializer_for
from ..types.mapping import BasicTypeInfo, TypeInformation

_hashing: ModuleType | None
try:
    from . import _hashing
except ImportError:  # the C accelerator is optional
    _hashing = None

_M32 = 0xFFFFFFFF


def _signed32(h: int) -> int:
    h &= _M32
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def murmur_hash(code: int) -> int:
    """Flink's ``MathUtils.murmurHash(int)``: a non-negative, well-mixed int."""
    h = (code & _M32) * 0xCC9E2D51 & _M32
    h = ((h << 15) | (h >> 17)) & _M32
    h = h * 0x1B873593 & _M32
    h = ((h << 13) | (h >> 19)) & _M32
    h = (h * 5 + 0xE6546B64) & _M32
    h ^= 4
    h ^= h >> 16
    h = h * 0x85EBCA6B & _M32
    h ^= h >> 13
    h = h * 0xC2B2AE35 & _M32
    h ^= h >> 16
    s = _signed32(h)
    if s >= 0:
        return s
    return -s if s != -0x8000_0000 else 0


def java_string_hash(value: str) -> int:
    """Java ``String.hashCode()`` over UTF-16 code units (surrogate pairs included)."""
    h = 0
    if value.isascii():
        for c in value.encode("ascii"):
            h = (31 * h + c) & _M32
    else:
        units = value.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & _M32
    return _signed32(h)


def _check_int(value: Any, bits: int, name: str) -> int:
    if type(value) is bool or not isinstance(value, int):
        raise StateTypeError(f"a {name} key must be an int, got {type(value).__name__} {value!r}")
    limit = 1 << (bits - 1)
    if not -limit <= value < limit:
        raise StateTypeError(f"{value} is out of range for a {name} key", code="INVALID_KEY")
    return int(value)


def _long_hash(value: Any) -> int:
    v = _check_int(value, 64, "LONG") & 0xFFFF_FFFF_FFFF_FFFF
    return _signed32(v ^ (v >> 32))


def _double_hash(value: Any) -> int:
    if not isinstance(value, (float, int)) or isinstance(value, bool):
        raise StateTypeError(f"a DOUBLE key must be a float, got {value!r}")
    bits = 0x7FF8_0000_0000_0000 if math.isnan(value) else struct.unpack(">Q", struct.pack(">d", value))[0]
    return _signed32(bits ^ (bits >> 32))


def _float_hash(value: Any) -> int:
    if not isinstance(value, (float, int)) or isinstance(value, bool):
        raise StateTypeError(f"a FLOAT key must be a float, got {value!r}")
    if math.isnan(value):
        return 0x7FC0_0000
    try:
        return _signed32(struct.unpack(">I", struct.pack(">f", value))[0])
    except OverflowError as exc:
        raise StateTypeError(f"{value} is out of range for a FLOAT key", code="INVALID_KEY") from exc


def _char_hash(value: Any) -> int:
    if not isinstance(value, str) or len(value) != 1 or ord(value) > 0xFFFF:
        raise StateTypeError(f"a CHAR key must be one UTF-16 character, got {value!r}")
    return ord(value)


def _bool_hash(value: Any) -> int:
    if not isinstance(value, bool):
        raise StateTypeError(f"a BOOLEAN key must be a bool, got {value!r}")
    return 1231 if value else 1237


def _string_hash(value: Any) -> int:
    if not isinstance(value, str):
        raise StateTypeError(f"a STRING key must be a str, got {type(value).__name__} {value!r}")
    return java_string_hash(value)


_JAVA_HASHES: dict[str, Callable[[Any], int]] = {
    "STRING": _string_hash,
    "INT": lambda v: _check_int(v, 32, "INT"),
    "LONG": _long_hash,
    "SHORT": lambda v: _check_int(v, 16, "SHORT"),
    "BYTE": lambda v: _check_int(v, 8, "BYTE"),
    "BOOLEAN": _bool_hash,
    "DOUBLE": _double_hash,
    "FLOAT": _float_hash,
    "CHAR": _char_hash,
}


def key_hash_code(key: Any, key_type: TypeInformation) -> int:
    """The 32-bit hash code a key's group is computed from.

    Java ``hashCode()`` for STRING, INT, LONG, SHORT, BYTE, BOOLEAN, DOUBLE, FLOAT and
    CHAR keys (so keys land in the same group as in Flink); for every other type the
    CRC-32 of the key's canonical serialized bytes.
    """
    if isinstance(key_type, BasicTypeInfo):
        java = _JAVA_HASHES.get(key_type.name)
        if java is not None:
            return java(key)
    return _signed32(zlib.crc32(serializer_for(key_type).to_bytes(key)))


def java_hashed(key_type: TypeInformation) -> bool:
    """Whether keys of ``key_type`` hash as Java's ``hashCode()``, so land in Flink's key groups.

    Keys of any other type (tuples, rows, POJOs, arrays...) are in a key group of a Flink
    savepoint that :func:`key_hash_code` does not reproduce.
    """
    return isinstance(key_type, BasicTypeInfo) and key_type.name in _JAVA_HASHES


def key_group_assigner(key_type: TypeInformation) -> Callable[[Any, int], int]:
    """A function ``(key, max_parallelism) -> key group``, the fastest available.

    It does not check ``max_parallelism``; callers validate it once.
    """
    name = key_type.name if isinstance(key_type, BasicTypeInfo) else None
    if _hashing is not None:
        fast: Callable[[Any, int], int] | None = {
            "LONG": _hashing.key_group_for_long,
            "INT": _hashing.key_group_for_int,
            "STRING": _hashing.key_group_for_string,
        }.get(name or "")
        if fast is not None:
            return fast
        by_hash = _hashing.key_group_for_hash
        return lambda key, max_p: by_hash(key_hash_code(key, key_type), max_p)
    return lambda key, max_p: murmur_hash(key_hash_code(key, key_type)) % max_p
