"""Whole key groups decoded as columns for the commonest keyed states: a VALUE (or
REDUCING, AGGREGATING) state in the void namespace without TTL.

With the C accelerator ``_keyed_columns`` (built where a compiler is), keys and values of
every atomic type (LONG, INT, SHORT, BYTE, BOOLEAN, DOUBLE, FLOAT, CHAR, STRING, byte[]) are
decoded in one pass straight into Arrow buffers (:func:`native_kinds`, :func:`native_columns`).
Without it, or for a block it does not take, LONG/INT keys with ASCII strings or fixed-width
numbers go by NumPy: one Python pass finds where each entry's key and value start (two int
reads per entry), then NumPy gathers the keys and values at once. A block neither takes
(another layout, a malformed entry) returns None and is decoded by the general path
(:mod:`.keyed_read`), which is the model of both and names a bad entry in its typed error.
"""

from __future__ import annotations

import struct
from types import ModuleType

import numpy as np
import pyarrow as pa

from flinkstate.state.serializers.batch import batch_kind

from ..types.flink_type import FlinkType
from .header_read import StateInfo

_native: ModuleType | None
try:
    from . import _keyed_columns as _native
except ImportError:  # built without a C compiler: the NumPy and general paths alone
    _native = None

_INT = struct.Struct(">i")
_SHORT = struct.Struct(">H")
_NUMERIC = {"LONG": ">i8", "INT": ">i4", "SHORT": ">i2", "DOUBLE": ">f8", "FLOAT": ">f4"}
_ARROW = {
    "LONG": pa.int64(),
    "INT": pa.int32(),
    "SHORT": pa.int16(),
    "DOUBLE": pa.float64(),
    "FLOAT": pa.float32(),
}


#: The Arrow type of each kind of the accelerator (state/serializers/batch.py's kinds).
_KIND_ARROW = {
    1: pa.int64(),
    2: pa.int32(),
    3: pa.int16(),
    4: pa.int8(),
    5: pa.bool_(),
    6: pa.float64(),
    7: pa.float32(),
    8: pa.string(),
    9: pa.string(),
    10: pa.binary(),
}


def _plain(info: StateInfo) -> bool:
    """A single-value state in the void namespace, without TTL."""
    return (
        info.kind in ("VALUE", "REDUCING", "AGGREGATING")
        and not info.ttl
        and info.namespace is not None
        and info.namespace.void
    )


def eligible(info: StateInfo, key_name: str | None) -> bool:
    """Whether the NumPy path may take the state's blocks."""
    value = info.value.type_info
    return (
        _plain(info)
        and key_name in ("LONG", "INT")
        and value is not None
        and str(value) in (*_NUMERIC, "STRING")
    )


def _kind(t: FlinkType) -> int | None:
    """The accelerator's kind of ``t``: an atomic serializer whose Arrow type is the kind's."""
    if t.serializer is None or t.type_info is None:
        return None
    kind = batch_kind(t.serializer)
    return kind if kind is not None and t.type_info.to_arrow() == _KIND_ARROW[kind] else None


def native_kinds(info: StateInfo, key: FlinkType) -> tuple[int, int] | None:
    """(key kind, value kind) for :func:`native_columns`, or None: the state is not its to take."""
    if _native is None or not _plain(info):
        return None
    key_kind, value_kind = _kind(key), _kind(info.value)
    return None if key_kind is None or value_kind is None else (key_kind, value_kind)


def _array(kind: int, n: int, data: bytes, offsets: bytes | None) -> pa.Array:
    buffers = [None, pa.py_buffer(data)] if offsets is None else [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(_KIND_ARROW[kind], n, buffers)


def native_columns(
    buf: bytes, pos: int, kg: int, state_id: int, states: int, prefix: int, kinds: tuple[int, int]
) -> tuple[pa.Array, pa.Array] | None:
    """(keys, values) of state ``state_id`` (of ``states``) in the block at ``pos``, decoded by
    the accelerator; None: not taken (the general path decodes the block or names what is wrong)."""
    assert _native is not None  # native_kinds gave the kinds
    found = _native.decode_block(buf, pos, kg, state_id, states, prefix, *kinds)
    if found is None:
        return None
    n, key_data, key_offsets, value_data, value_offsets = found
    return _array(kinds[0], n, key_data, key_offsets), _array(kinds[1], n, value_data, value_offsets)


def block_columns(
    buf: bytes, pos: int, kg: int, state_id: int, states: int, prefix: int, key_name: str, value_name: str
) -> tuple[pa.Array, pa.Array] | None:
    """(keys, values) of state ``state_id`` (of ``states``) in the key group block at ``pos``;
    None: not taken."""
    unpack_int, unpack_short = _INT.unpack_from, _SHORT.unpack_from
    key_len = prefix + (8 if key_name == "LONG" else 4) + 1
    key_starts: list[int] = []
    value_starts: list[int] = []
    end = len(buf)
    if pos + 2 > end:
        return None
    (current,) = unpack_short(buf, pos)
    pos += 2
    while current < states:
        if pos + 4 > end:
            return None
        (klen,) = unpack_int(buf, pos)
        vpos = pos + 4 + klen
        if klen < 1 or vpos + 4 > end or (klen != key_len and current == state_id):
            return None
        (vlen,) = unpack_int(buf, vpos)
        if vlen < 0 or vpos + 4 + vlen > end:
            return None
        if current == state_id:
            key_starts.append(pos + 4 + prefix)
            value_starts.append(vpos)
        flagged = buf[pos + 4] & 0x80
        pos = vpos + 4 + vlen
        if flagged:
            if pos + 2 > end:
                return None
            (current,) = unpack_short(buf, pos)
            pos += 2
            if current == 0xFFFF:
                break
    else:
        return None  # an unknown state id
    data = np.frombuffer(buf, np.uint8)
    kwidth = 8 if key_name == "LONG" else 4
    ks = np.asarray(key_starts, np.int64)
    group = (
        data[ks - 1].astype(np.int64) if prefix == 1 else data[ks - 2].astype(np.int64) << 8 | data[ks - 1]
    )
    if np.any(group & ~(0x80 << (8 * (prefix - 1))) != kg) or np.any(data[ks + kwidth] != 0):
        return None  # the general path names the bad entry
    kidx = ks[:, None] + np.arange(kwidth)
    keys = (
        data[kidx]
        .copy()
        .view(">i8" if kwidth == 8 else ">i4")
        .reshape(-1)
        .astype(np.int64 if kwidth == 8 else np.int32)
    )
    vstarts = np.asarray(value_starts, np.int64)
    values = _values(data, vstarts, value_name)
    return None if values is None else (pa.array(keys), values)


def _values(data: np.ndarray, vstarts: np.ndarray, name: str) -> pa.Array | None:
    lengths = (
        data[vstarts[:, None] + np.arange(4)].astype(np.int64) * np.array([1 << 24, 1 << 16, 1 << 8, 1])
    ).sum(axis=1)
    body = vstarts + 4
    if name in _NUMERIC:
        width = np.dtype(_NUMERIC[name]).itemsize
        if np.any(lengths != width):
            return None
        raw = data[body[:, None] + np.arange(width)].copy().view(_NUMERIC[name]).reshape(-1)
        return pa.array(raw.astype(raw.dtype.newbyteorder("=")), _ARROW[name])
    # STRING: varint(length + 1) in one byte (< 0x80), then one byte per ASCII char.
    if len(lengths) and (np.any(lengths < 1) or np.any(data[body] != lengths)):
        return None
    text_len = lengths - 1
    offsets = np.zeros(len(text_len) + 1, np.int64)
    np.cumsum(text_len, out=offsets[1:])
    starts = np.repeat(body + 1 - offsets[:-1], text_len) + np.arange(offsets[-1])
    chars = data[starts]
    if np.any(chars >= 0x80):
        return None
    return pa.Array.from_buffers(
        pa.large_string(), len(text_len), [None, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes())]
    ).cast(pa.string())


def entry_columns(
    keys: list[bytes], values: list[bytes], kg: int, prefix: int, key_name: str, value_name: str
) -> tuple[pa.Array, pa.Array] | None:
    """(keys, values) of one key group's RocksDB entries (key bytes, value bytes); None: not taken."""
    kwidth = 8 if key_name == "LONG" else 4
    n, key_len = len(keys), prefix + kwidth + 1
    joined = b"".join(keys)
    if len(joined) != n * key_len:
        return None
    k = np.frombuffer(joined, np.uint8).reshape(n, key_len)
    group = k[:, 0].astype(np.int64) if prefix == 1 else k[:, 0].astype(np.int64) << 8 | k[:, 1]
    if np.any(group != kg) or np.any(k[:, -1] != 0):
        return None  # the general path names the bad entry
    out_keys = k[:, prefix : prefix + kwidth].copy().view(">i8" if kwidth == 8 else ">i4").reshape(-1)
    lengths = np.fromiter(map(len, values), np.int64, n)
    data = np.frombuffer(b"".join(values), np.uint8)
    starts = np.zeros(n, np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    if value_name in _NUMERIC:
        width = np.dtype(_NUMERIC[value_name]).itemsize
        if np.any(lengths != width):
            return None
        raw = data.view(_NUMERIC[value_name])
        column = pa.array(raw.astype(raw.dtype.newbyteorder("=")), _ARROW[value_name])
    else:
        # STRING: varint(length + 1) in one byte (< 0x80), then one byte per ASCII char.
        if n and (np.any(lengths < 1) or np.any(data[starts] != lengths)):
            return None
        text = np.ones(len(data), bool)
        text[starts] = False
        chars = data[text]
        if np.any(chars >= 0x80):
            return None
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths - 1, out=offsets[1:])
        column = pa.Array.from_buffers(
            pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes())]
        ).cast(pa.string())
    return pa.array(out_keys.astype(np.int64 if kwidth == 8 else np.int32)), column
