"""One state's entries of a key group encoded in one call, in Flink's key/value byte layout
(the C accelerator ``_batch``), for keys and values of the atomic serializers.

:func:`encode_block` gives the bytes the per-value path gives (``TypeSerializer.to_bytes``,
then sorting and framing) or None: when the accelerator is not built, a serializer is not
one it covers, or a value is not exactly of its kind's Python type (an ``np.int64``, an
``int`` for a DOUBLE, an out-of-range number, a TTL entry without its timestamp). The caller
then takes the per-value path, which writes the same bytes or raises the typed error.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .atomic import (
    BoolSerializer,
    BytesSerializer,
    CharSerializer,
    FloatSerializer,
    IntSerializer,
    StringSerializer,
)
from .base import TypeSerializer

_batch: ModuleType | None
try:
    from . import _batch
except ImportError:  # built without a C compiler: the per-value path alone
    _batch = None

# The kinds of _batch.c, by serializer class and struct format.
_FIXED: dict[tuple[type[TypeSerializer], str], int] = {
    (IntSerializer, ">q"): 1,
    (IntSerializer, ">i"): 2,
    (IntSerializer, ">h"): 3,
    (IntSerializer, ">b"): 4,
    (FloatSerializer, ">d"): 6,
    (FloatSerializer, ">f"): 7,
}
_OTHER = {BoolSerializer: 5, CharSerializer: 8, BytesSerializer: 10}
_STRING = 9


def batch_kind(serializer: TypeSerializer) -> int | None:
    """The accelerator's kind of ``serializer``, or None when it does not cover it."""
    cls = type(serializer)
    if isinstance(serializer, (IntSerializer, FloatSerializer)):
        return _FIXED.get((cls, serializer.fmt))
    if isinstance(serializer, StringSerializer) and cls is StringSerializer:
        return None if serializer.nullable else _STRING
    return _OTHER.get(cls)


def encode_block(
    prefix: bytes,
    suffix: bytes,
    keys: list[Any],
    key_kind: int,
    values: list[Any],
    value_kind: int,
    stamps: list[Any] | None,
) -> bytes | None:
    """``int length, key, int length, value`` records sorted by key (then value) bytes, the
    last key's first byte or'ed with 0x80 (empty when every value is None: those entries are
    left out). A key's bytes are ``prefix + key + suffix``; with ``stamps``, a value's are its
    8-byte timestamp, then the value. None: take the per-value path (see the module)."""
    if _batch is None:
        return None
    result: bytes | None = _batch.encode_block(prefix, suffix, keys, key_kind, values, value_kind, stamps)
    return result
