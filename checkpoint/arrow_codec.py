"""Python values <-> Arrow arrays, by type information.

Snapshots store typed columns: ROW values (tuples) become structs, MAP values (dicts)
Arrow maps, PICKLED values binary pickles. Reading turns structs back into tuples and
maps into dicts; pickles are only loaded when the caller allows it (a pickle runs code
when loaded), otherwise reading them is a typed error.
"""

from __future__ import annotations

import datetime
import decimal
import fractions
import pickle
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from flinkstate.state.errors import SerializationError
from flinkstate.state.types.mapping import (
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
    """An Arrow array of ``t.to_arrow()`` holding ``values``.

    Stricter than ``pa.array``, which quietly truncates a fraction given for an integer,
    date, time or timestamp (1.7 and ``Decimal("1.5")`` become 1) and a datetime given for a
    date: such a value is a ``[TYPE_MISMATCH]``, as the type's serializer (RocksDB's write)
    makes it."""
    enc = _encoder(t)
    data = values if enc is None else [enc(v) for v in values]
    arrow = t.to_arrow()
    try:
        if pa.types.is_integer(arrow):
            return _integers(data, arrow)
        check = _strict(arrow)
        if check is not None:
            for value in data:
                check(value)
        return pa.array(data, type=arrow)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise SerializationError(f"values do not fit type {t}: {exc}", code="TYPE_MISMATCH") from exc


def _integers(data: list[Any], arrow: pa.DataType) -> pa.Array:
    """A flat integer column: inferred (ints infer as integers, anything else does not),
    then cast with overflow checks."""
    inferred = pa.array(data)
    if pa.types.is_null(inferred.type):
        return pa.nulls(len(data), arrow)
    if not pa.types.is_integer(inferred.type):
        _not_an_integer(next(v for v in data if v is not None and not _is_integer(v)))
    return inferred.cast(arrow, safe=True)


Check = Callable[[Any], None]


def _is_integer(value: Any) -> bool:
    return hasattr(type(value), "__index__") and not isinstance(value, bool)


def _not_an_integer(value: Any) -> None:
    raise TypeError(f"{value!r} ({type(value).__name__}) is not an integer")


def _integer(value: Any) -> None:
    if value is not None and not _is_integer(value):
        _not_an_integer(value)


def _temporal(value: Any) -> None:
    """Ints count in the type's unit, as in Arrow (the Flink readers give nanoseconds so);
    a fraction of one would be dropped."""
    if isinstance(value, float | decimal.Decimal | fractions.Fraction):
        raise TypeError(f"{value!r} ({type(value).__name__}) is not a date, time or duration")


def _date(value: Any) -> None:
    _temporal(value)
    if isinstance(value, datetime.datetime):
        raise TypeError(f"{value!r} is a datetime, not a date (its time of day would be dropped)")


def _strict(arrow: pa.DataType) -> Check | None:
    """Checks, per value, what ``pa.array`` would quietly convert, or None when nothing
    of ``arrow`` can be (values are in the encoded form ``pa.array`` takes)."""
    if pa.types.is_integer(arrow):
        return _integer
    if pa.types.is_date(arrow):
        return _date
    if pa.types.is_temporal(arrow):
        return _temporal
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow) or pa.types.is_fixed_size_list(arrow):
        return _each(_strict(arrow.value_type))
    if pa.types.is_map(arrow):
        key, item = _strict(arrow.key_type), _strict(arrow.item_type)
        if key is None and item is None:
            return None
        pair = _fields([key, item])
        assert pair is not None
        return _each(pair, pairs=True)
    if pa.types.is_struct(arrow):
        return _fields([_strict(arrow.field(i).type) for i in range(arrow.num_fields)], arrow.names)
    return None


def _each(inner: Check | None, pairs: bool = False) -> Check | None:
    if inner is None:
        return None

    def check(value: Any) -> None:
        if value is not None:
            for element in value.items() if pairs and isinstance(value, dict) else value:
                inner(element)

    return check


def _fields(checks: list[Check | None], names: list[str] | None = None) -> Check | None:
    if all(c is None for c in checks):
        return None
    indexed = [(i, c) for i, c in enumerate(checks) if c is not None]

    def check(value: Any) -> None:
        if value is None:
            return
        if isinstance(value, dict) and names is not None:
            for i, c in indexed:
                c(value.get(names[i]))
        else:
            for i, c in indexed:
                c(value[i])

    return check


def _has_map(t: pa.DataType) -> bool:
    if pa.types.is_map(t):
        return True
    if pa.types.is_dictionary(t):
        return _has_map(t.value_type)
    return any(_has_map(t.field(i).type) for i in range(t.num_fields))


def from_arrow(
    array: pa.Array | pa.ChunkedArray, t: TypeInformation, allow_pickle: bool = False
) -> list[Any]:
    """The Python values of an array of type ``t``."""
    # maps as dicts: asked for only where there is a map, as it makes every to_pylist ~10x slower
    values = array.to_pylist(maps_as_pydicts="strict") if _has_map(array.type) else array.to_pylist()
    dec = _decoder(t, allow_pickle)
    return values if dec is None else [dec(v) for v in values]
