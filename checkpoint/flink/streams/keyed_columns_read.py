"""Whole key groups decoded as columns for the commonest keyed states: a VALUE (or
REDUCING, AGGREGATING) state in the void namespace without TTL.

With the C accelerator ``_keyed_columns`` (built where a compiler is), keys and values of
every atomic type (LONG, INT, SHORT, BYTE, BOOLEAN, DOUBLE, FLOAT, CHAR, STRING, byte[]), and
Kryo values read as a declared struct (:class:`..types.kryo_read.KryoReader`), are decoded in
one pass straight into Arrow buffers (:func:`native_plan`, :func:`native_columns`).
Without it, or for a block it does not take, LONG/INT keys with ASCII strings or fixed-width
numbers go by NumPy: one Python pass finds where each entry's key and value start (two int
reads per entry), then NumPy gathers the keys and values at once. A block neither takes
(another layout, a malformed entry) returns None and is decoded by the general path
(:mod:`.keyed_read`), which is the model of both and names a bad entry in its typed error.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import pyarrow as pa

from flinkstate.state.errors import FlinkStateError
from flinkstate.state.serializers.batch import batch_kind

from ..types.flink_type import FlinkType
from ..types.kryo_read import KryoReader, encoding
from .header_read import StateInfo

_native: ModuleType | None
try:
    from . import _keyed_columns

    _native = _keyed_columns
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


#: The accelerator's kind of each Kryo field encoding (:data:`..types.kryo_read.ENCODINGS`).
_KRYO_KIND = {
    "long": 1, "int": 2, "short": 3, "byte": 4, "boolean": 5, "double": 6, "float": 7, "char": 8, "string": 9,
}  # fmt: skip


@dataclass(frozen=True)
class NativePlan:
    """What the C decoder is given for one state: the key's kind, and the value's kind or
    the Kryo reader of a declared struct (``fields``: a kind byte per field in Kryo's order,
    bit 0x80 set for a nullable one)."""

    key_kind: int
    value_kind: int = 0
    kryo: KryoReader | None = None
    fields: bytes = b""


def native_plan(info: StateInfo, key: FlinkType) -> NativePlan | None:
    """How :func:`native_columns` decodes the state's blocks, or None: not the accelerator's."""
    key_kind = _kind(key)
    if _native is None or not _plain(info) or key_kind is None:
        return None
    reader = info.value.serializer
    if type(reader) is KryoReader:
        fields = [(_KRYO_KIND.get(encoding(f) or ""), f.nullable) for f in reader.written]
        if any(kind is None for kind, _ in fields):
            return None
        return NativePlan(
            key_kind, kryo=reader, fields=bytes((k or 0) | (0x80 if n else 0) for k, n in fields)
        )
    value_kind = _kind(info.value)
    return None if value_kind is None else NativePlan(key_kind, value_kind)


def _array(t: pa.DataType, n: int, data: bytes, offsets: bytes | None, validity: bytes | None) -> pa.Array:
    mask = None if validity is None else pa.py_buffer(validity)
    body = [pa.py_buffer(data)] if offsets is None else [pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(t, n, [mask, *body])


def native_columns(
    buf: bytes, pos: int, kg: int, state_id: int, states: int, prefix: int, plan: NativePlan
) -> tuple[pa.Array, pa.Array] | None:
    """(keys, values) of state ``state_id`` (of ``states``) in the block at ``pos``, decoded by
    the accelerator; None: not taken (the general path decodes the block or names what is wrong)."""
    assert _native is not None  # native_plan made the plan
    key_type = _KIND_ARROW[plan.key_kind]
    if plan.kryo is None:
        found = _native.decode_block(buf, pos, kg, state_id, states, prefix, plan.key_kind, plan.value_kind)
        if found is None:
            return None
        n, keys, values = found
        return _array(key_type, n, *keys), _array(_KIND_ARROW[plan.value_kind], n, *values)
    reader = plan.kryo
    try:
        version = reader.kryo
    except FlinkStateError:
        return None  # the general path raises it where it reads the first value
    known = -1 if reader.class_id is None else reader.class_id
    java_class = reader.java_class.encode("utf-8", "surrogatepass")
    found = _native.decode_kryo_block(
        buf, pos, kg, state_id, states, prefix, plan.key_kind, plan.fields, version, known, java_class
    )
    if found is None:
        return None
    n, keys, columns, class_id = found
    if reader.class_id is None and class_id >= 0:
        reader.class_id = class_id
    children = {f.name: _array(f.type, n, *c) for f, c in zip(reader.written, columns, strict=True)}
    declared = [reader.declared.field(i) for i in range(reader.declared.num_fields)]
    values = pa.StructArray.from_arrays([children[f.name] for f in declared], fields=declared)
    return _array(key_type, n, *keys), values


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
