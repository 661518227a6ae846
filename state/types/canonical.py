"""Keys as the checkpoint stores them: a FLOAT is a 32-bit float.

Python floats are doubles, so ``0.1`` given as a FLOAT key or map user key is stored (and
serialized by RocksDB) as ``0.10000000149011612``. The heap keeps keys as given, so it
rounds FLOAT keys, FLOAT fields of row keys and FLOAT user keys to that value on the way
in; heap, RocksDB and every restore then agree. Flink's key group hashes the float32 bits,
so a key's key group is unchanged by the rounding.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from .typeinfo import BasicTypeInfo, RowTypeInfo, TypeInformation

_F32 = struct.Struct("<f")


def float32(value: Any) -> Any:
    """``value`` rounded to the nearest 32-bit float; kept as is when that fails (NaN,
    a value out of range or not a number: the key-group function then says why)."""
    try:
        return _F32.unpack(_F32.pack(value))[0] if value == value else value
    except (struct.error, OverflowError, TypeError):
        return value


def canonicalizer(type_info: TypeInformation | None) -> Callable[[Any], Any] | None:
    """The function that rounds the FLOAT parts of a value of ``type_info``; ``None``
    when it has none."""
    if isinstance(type_info, BasicTypeInfo):
        return float32 if type_info.name == "FLOAT" else None
    if not isinstance(type_info, RowTypeInfo):
        return None
    fields = [canonicalizer(t) for t in type_info.field_types]
    if not any(fields):
        return None

    def row(value: Any) -> Any:
        if not isinstance(value, tuple) or len(value) != len(fields):
            return value
        return tuple(v if f is None or v is None else f(v) for f, v in zip(fields, value, strict=True))

    return row
