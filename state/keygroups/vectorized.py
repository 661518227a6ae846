"""Key groups of whole Arrow columns at once (bulk loads, Spark writes).

Integer and boolean keys are hashed in bulk: Java ``hashCode`` then Flink's murmur
finalizer, by the C accelerator over the column's buffer when it is built, else with numpy
in wrapping 32-bit arithmetic; other keys go through the per-key function, as the Python
values the state engine takes (a struct is a ROW key: a tuple).
Results equal :func:`flinkstate.state.keygroups.assignment.assign_to_key_group` for every key.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import InvalidArgumentError
from ..types.typeinfo import BasicTypeInfo, ListTypeInfo, MapTypeInfo, RowTypeInfo, TypeInformation
from .assignment import check_max_parallelism
from .hashing import _hashing, key_group_assigner

_INTEGERS = {"BYTE": np.int8, "SHORT": np.int16, "INT": np.int32, "LONG": np.int64}


def _rotl(h: np.ndarray, r: int) -> np.ndarray:
    return (h << np.uint32(r)) | (h >> np.uint32(32 - r))


def murmur_hash_array(codes: np.ndarray) -> np.ndarray:
    """Flink's murmur finalizer of int32 hash codes, element-wise (non-negative int32)."""
    with np.errstate(over="ignore"):
        h = codes.astype(np.int32).view(np.uint32)
        h = h * np.uint32(0xCC9E2D51)
        h = _rotl(h, 15) * np.uint32(0x1B873593)
        h = _rotl(h, 13) * np.uint32(5) + np.uint32(0xE6546B64)
        h ^= np.uint32(4)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    s = h.view(np.int32).astype(np.int64)
    return np.where(s >= 0, s, np.where(s != -(1 << 31), -s, 0))


def java_hash_codes(values: pa.Array, key_type: BasicTypeInfo) -> np.ndarray | None:
    """Java hash codes (int32) of an integer/boolean column, or None for other types."""
    name = key_type.name
    if name == "BOOLEAN":
        flags = values.to_numpy(zero_copy_only=False).astype(bool)
        return np.where(flags, 1231, 1237).astype(np.int32)
    dtype = _INTEGERS.get(name)
    if dtype is None:
        return None
    ints: np.ndarray = values.cast(pa.from_numpy_dtype(dtype)).to_numpy(zero_copy_only=False).astype(dtype)
    if name != "LONG":
        narrowed: np.ndarray = ints.astype(np.int32)
        return narrowed
    u = ints.view(np.uint64)
    folded: np.ndarray = (u ^ (u >> np.uint64(32))).astype(np.uint32).view(np.int32)
    return folded


def _int32_array(data: bytes) -> pa.Array:
    return pa.Array.from_buffers(pa.int32(), len(data) // 4, [None, pa.py_buffer(data)])


def assign_key_groups(
    values: pa.Array | pa.ChunkedArray, key_type: TypeInformation, max_parallelism: int
) -> pa.Array:
    """The key group (int32) of every key in ``values``; a null key is an error."""
    check_max_parallelism(max_parallelism)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.null_count:
        raise InvalidArgumentError(
            f"{values.null_count} keys are null; keys must not be null", code="INVALID_KEY"
        )
    if _hashing is not None and isinstance(key_type, BasicTypeInfo) and key_type.name == "LONG":
        longs = values.cast(pa.int64()).to_numpy(zero_copy_only=False)
        return _int32_array(_hashing.key_groups_of_longs(np.ascontiguousarray(longs), max_parallelism))
    codes = java_hash_codes(values, key_type) if isinstance(key_type, BasicTypeInfo) else None
    if codes is not None:
        if _hashing is not None:
            return _int32_array(_hashing.key_groups_of_codes(np.ascontiguousarray(codes), max_parallelism))
        return pa.array((murmur_hash_array(codes) % max_parallelism).astype(np.int32), pa.int32())
    assign = key_group_assigner(key_type)
    keys = values.to_pylist(maps_as_pydicts="strict")
    return pa.array([assign(engine_value(k, key_type), max_parallelism) for k in keys], pa.int32())


def engine_value(value: Any, t: TypeInformation) -> Any:
    """A ``to_pylist`` value as the state engine holds it: structs as tuples (field order),
    nested through lists and maps."""
    if value is None:
        return None
    if isinstance(t, RowTypeInfo):
        return tuple(engine_value(value[n], f) for n, f in zip(t.field_names, t.field_types, strict=True))
    if isinstance(t, ListTypeInfo) and not t.is_bytes:
        return [engine_value(e, t.element) for e in value]
    if isinstance(t, MapTypeInfo):
        return {engine_value(k, t.key): engine_value(v, t.value) for k, v in value.items()}
    return value
