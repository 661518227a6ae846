"""Python values <-> Arrow arrays, by type information.

Snapshots store typed columns: ROW values (tuples) become structs, MAP values (dicts)
Arrow maps, PICKLED values binary pickles. Reading turns structs back into tuples and
maps into dicts; pickles are only loaded when the caller allows it (a pickle runs code
when loaded), otherwise reading them is a typed error.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flinkstate.state.errors import SerializationError
from flinkstate.state.types import (
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    RowTypeInfo,
    TypeInformation,
)

from .errors import CheckpointError

Convert = Callable[[Any], Any]


def _encoder(t: TypeInformation) -> Convert | None:
    """A per-value conversion to what ``pa.array`` accepts, or None when none is needed."""
    if isinstance(t, PickledBytesTypeInfo):
        return lambda v: None if v is None else pickle.dumps(v, protocol=4)
    if isinstance(t, ListTypeInfo) and not t.is_bytes:
        inner = _encoder(t.element)
        if inner is not None:
            return lambda v: None if v is None else [inner(e) for e in v]
    if isinstance(t, MapTypeInfo):
        key, value = _encoder(t.key), _encoder(t.value)
        if key is not None or value is not None:
            k = key or (lambda x: x)
            val = value or (lambda x: x)
            return lambda v: None if v is None else {k(a): val(b) for a, b in v.items()}
    if isinstance(t, RowTypeInfo):
        fields = [_encoder(f) for f in t.field_types]
        if any(f is not None for f in fields):
            conv = [f or (lambda x: x) for f in fields]
            return lambda v: None if v is None else tuple(c(x) for c, x in zip(conv, v, strict=True))
    return None


def _decoder(t: TypeInformation, allow_pickle: bool) -> Convert | None:
    """A per-value conversion of ``to_pylist`` output to our Python values."""
    if isinstance(t, PickledBytesTypeInfo):
        if not allow_pickle:
            return _refuse_pickle
        return lambda v: None if v is None else pickle.loads(v)
    if isinstance(t, ListTypeInfo) and not t.is_bytes:
        inner = _decoder(t.element, allow_pickle)
        if inner is not None:
            return lambda v: None if v is None else [inner(e) for e in v]
    if isinstance(t, MapTypeInfo):
        key, value = _decoder(t.key, allow_pickle), _decoder(t.value, allow_pickle)
        if key is not None or value is not None:
            k = key or (lambda x: x)
            val = value or (lambda x: x)
            return lambda v: None if v is None else {k(a): val(b) for a, b in v.items()}
    if isinstance(t, RowTypeInfo):
        names = t.field_names
        fields = [_decoder(f, allow_pickle) for f in t.field_types]
        if all(f is None for f in fields):
            return lambda v: None if v is None else tuple(v[n] for n in names)
        conv = [f or (lambda x: x) for f in fields]
        return lambda v: None if v is None else tuple(c(v[n]) for c, n in zip(conv, names, strict=True))
    return None


def _refuse_pickle(value: Any) -> Any:
    if value is None:
        return None
    raise CheckpointError(
        "this state holds pickled values; loading them runs code: pass allow_pickle=True "
        "(the connector option allowPickle=true) only for trusted checkpoints",
        code="PICKLE_NOT_ALLOWED",
    )


def is_plain_int64(t: TypeInformation) -> bool:
    """``t`` is stored as int64 and its values (ints) need no conversion."""
    return t.to_arrow() == pa.int64() and _encoder(t) is None


def int64_array(data: bytes) -> pa.Array:
    """An int64 array over a buffer of native int64 values (no copy)."""
    return pa.Array.from_buffers(pa.int64(), len(data) // 8, [None, pa.py_buffer(data)])


def to_arrow(values: list[Any], t: TypeInformation) -> pa.Array:
    """An Arrow array of ``t.to_arrow()`` holding ``values``."""
    enc = _encoder(t)
    data = values if enc is None else [enc(v) for v in values]
    try:
        return pa.array(data, type=t.to_arrow())
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise SerializationError(f"values do not fit type {t}: {exc}", code="TYPE_MISMATCH") from exc


def from_arrow(
    array: pa.Array | pa.ChunkedArray, t: TypeInformation, allow_pickle: bool = False
) -> list[Any]:
    """The Python values of an array of type ``t``."""
    values = array.to_pylist(maps_as_pydicts="strict")
    dec = _decoder(t, allow_pickle)
    return values if dec is None else [dec(v) for v in values]
