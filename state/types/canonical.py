"""One rule for "the same key", Flink's: keys are compared as their serialized bytes.

- Floats by their bits, as Java's ``doubleToLongBits`` / ``floatToIntBits``: every NaN is
  one key (:data:`NAN`, whatever its sign and payload), and ``0.0`` and ``-0.0`` are two.
  Python's ``==`` says the opposite on both counts (``nan != nan``, ``0.0 == -0.0``), so a
  key is kept in its canonical form: every NaN is the one object :data:`NAN` (a dict finds
  it by identity), and ``-0.0`` is :data:`NEGATIVE_ZERO`, a float equal to ``-0.0`` alone.
- Rows, namedtuples and ``pyspark.sql.Row`` are plain tuples of their fields.
- A FLOAT is a 32-bit float: Python floats are doubles, so ``0.1`` given as a FLOAT key or
  map user key is stored (and serialized by RocksDB) as ``0.10000000149011612``. The heap
  keeps keys as given, so it rounds FLOAT keys, FLOAT fields of row keys and FLOAT user
  keys to that value on the way in; heap, RocksDB and every restore then agree. Flink's
  key group hashes the float32 bits, so a key's key group is unchanged by the rounding.

:func:`canonicalizer` gives the function that puts a value of a type in that form (the
backends apply it to keys and map user keys, a restore to what it reads back);
:func:`key_token` compares values as Arrow's ``to_pylist`` gives them (structs as dicts)
by the same rule (the Spark writer's last-row-wins, the reader's merges and selections,
the change feed).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

from .typeinfo import BasicTypeInfo, RowTypeInfo, TypeInformation

_F32 = struct.Struct("<f")

NAN: float = struct.unpack(">d", b"\x7f\xf8" + bytes(6))[0]
"""The one NaN key: Java's canonical NaN (its FLOAT form has the canonical float bits too)."""


class _NegativeZero(float):
    """``-0.0`` as a key: equal to ``-0.0`` alone (not to ``0.0``), hashed apart from it."""

    __slots__ = ()

    def __new__(cls) -> _NegativeZero:
        return super().__new__(cls, -0.0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and float.__eq__(other, 0.0) is True and math.copysign(1.0, other) < 0

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return 0x7E57_0000_0000  # any value but hash(0.0); equal keys are all this object's kind

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _negative_zero, ()


NEGATIVE_ZERO: float = _NegativeZero()
"""The ``-0.0`` key (see the module docstring): prints, packs and computes as ``-0.0``."""


def _negative_zero() -> float:
    return NEGATIVE_ZERO


def canonical_float(value: float) -> float:
    """``value`` as a key: :data:`NAN` for every NaN, :data:`NEGATIVE_ZERO` for ``-0.0``."""
    if value != value:
        return NAN
    if value == 0.0 and math.copysign(1.0, value) < 0:
        return NEGATIVE_ZERO
    return value


def float32(value: Any) -> Any:
    """``value`` rounded to the nearest 32-bit float, as a key (:func:`canonical_float`);
    kept as is when that fails (out of range or not a number: the key-group function then
    says why)."""
    try:
        return canonical_float(_F32.unpack(_F32.pack(value))[0]) if value == value else NAN
    except (struct.error, OverflowError, TypeError):
        return value


def _plain_tuple(value: Any) -> Any:
    """A nested row as a plain tuple (a value of another kind is left for the checks)."""
    return tuple(value) if isinstance(value, tuple) else value


def _double(value: Any) -> Any:
    return canonical_float(value) if isinstance(value, float) else value


def canonicalizer(type_info: TypeInformation | None) -> Callable[[Any], Any] | None:
    """The function that puts a value of ``type_info`` in its canonical form (the module
    docstring); ``None`` when every value whose top-level is a plain tuple (or not a tuple)
    already is."""
    if isinstance(type_info, BasicTypeInfo):
        return float32 if type_info.name == "FLOAT" else _double if type_info.name == "DOUBLE" else None
    if not isinstance(type_info, RowTypeInfo):
        return None
    fields = [
        canonicalizer(t) or (_plain_tuple if isinstance(t, RowTypeInfo) else None)
        for t in type_info.field_types
    ]
    if not any(fields):
        return None

    def row(value: Any) -> Any:
        if not isinstance(value, tuple) or len(value) != len(fields):
            return value
        return tuple(v if f is None or v is None else f(v) for f, v in zip(fields, value, strict=True))

    return row


def canonical_key(value: Any, type_info: TypeInformation | None) -> Any:
    """``value`` (a key, a map user key, a namespace of ``type_info``) in canonical form."""
    if isinstance(value, tuple) and type(value) is not tuple:
        value = tuple(value)
    canon = canonicalizer(type_info)
    return value if canon is None or value is None else canon(value)


def key_token(value: Any) -> Any:
    """A hashable stand-in for a value as Arrow's ``to_pylist`` gives it (or as a key is
    given), equal to another's exactly when they are the same key by the module's rule:
    floats by bits with one NaN, structs (dicts) and rows as tuples of their fields, lists
    as tuples."""
    if isinstance(value, float):
        return canonical_float(value)
    if isinstance(value, dict):
        return tuple(key_token(v) for v in value.values())
    if isinstance(value, list | tuple):
        return tuple(key_token(v) for v in value)
    return value


def canonical_values(values: list[Any], type_info: TypeInformation | None) -> list[Any]:
    """Keys (or user keys, namespaces) of ``type_info`` read back from storage, in canonical
    form (``values`` itself when they already are)."""
    canon = canonicalizer(type_info)
    if canon is None:
        return values
    return [None if v is None else canon(v) for v in values]


def canonical_nans(array: Any) -> Any:
    """An Arrow array (or chunked array) of keys with every NaN, at any depth of structs,
    given :data:`NAN`'s bits: Arrow compares floats by their bits (so ``-0.0`` and ``0.0``
    are already two), and equal keys must have equal bits."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = array.type
    if isinstance(array, pa.ChunkedArray):
        return pa.chunked_array([canonical_nans(c) for c in array.chunks], t)
    if pa.types.is_floating(t):
        nan = pc.is_nan(array)
        return pc.if_else(nan, pa.scalar(NAN, t), array) if pc.any(nan).as_py() else array
    if pa.types.is_struct(t):
        fields = [canonical_nans(array.field(i)) for i in range(t.num_fields)]
        if all(f is array.field(i) for i, f in enumerate(fields)):
            return array
        return pa.StructArray.from_arrays(fields, fields=list(t), mask=array.is_null())
    return array
