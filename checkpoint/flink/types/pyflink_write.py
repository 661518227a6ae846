"""PyFlink's Python values encoded as its process-mode coders write them: the inverse of
:mod:`.pyflink_read` (the bytes of ``python-state-<name>``'s elements)."""

from __future__ import annotations

import pickle
import struct
from collections.abc import Callable
from typing import Any

from flinkstate.state.types.mapping import BasicTypeInfo, PickledBytesTypeInfo, RowTypeInfo, TypeInformation

from ..errors import UnsupportedFlinkWriteError
from .pyflink_read import FIXED, LENGTH


def encoder(t: TypeInformation, where: str) -> Callable[[Any], bytes]:
    """PyFlink's process-mode coder of ``t`` (the types :mod:`.pyflink_read` decodes): a value to its
    bytes; a value that does not fit is a ``TypeError``, ``ValueError`` or ``struct.error``."""
    if isinstance(t, BasicTypeInfo) and t.name in FIXED:
        pack = struct.Struct(FIXED[t.name]).pack
        if t.name == "BOOLEAN":
            return lambda v: pack(v) if isinstance(v, bool) else _refuse(v, "a bool")
        return pack
    if isinstance(t, BasicTypeInfo) and t.name == "STRING":
        return lambda v: _sized(v.encode("utf-8")) if isinstance(v, str) else _refuse(v, "a str")
    if isinstance(t, PickledBytesTypeInfo):
        return lambda v: _sized(pickle.dumps(v))
    if isinstance(t, RowTypeInfo) and t.kind == "ROW":
        fields = [encoder(f, where) for f in t.field_types]
        mask_bytes = (len(fields) + 2 + 7) // 8

        def row(v: Any) -> bytes:
            values = list(v.values()) if isinstance(v, dict) else list(v)
            if len(values) != len(fields):
                raise ValueError(f"a row of {len(fields)} fields, got {len(values)}")
            mask = bytearray(mask_bytes)  # row kind INSERT: both kind bits 0
            for i, value in enumerate(values):
                if value is None:
                    mask[(i + 2) >> 3] |= 0x80 >> ((i + 2) & 7)
            return bytes(mask) + b"".join(f(x) for f, x in zip(fields, values, strict=True) if x is not None)

        return row
    raise UnsupportedFlinkWriteError(
        f"{where}: type {t} cannot be written as PyFlink Python state (supported: LONG, INT, SHORT, "
        "BYTE, BOOLEAN, DOUBLE, FLOAT, STRING, PICKLED_BYTE_ARRAY and ROW of them)"
    )


def _sized(data: bytes) -> bytes:
    return LENGTH.pack(len(data)) + data


def _refuse(value: Any, wanted: str) -> bytes:
    raise TypeError(f"{value!r} is not {wanted}")
