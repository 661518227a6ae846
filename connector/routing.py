"""Routing rows to the subtasks that own their key groups, with Spark's own shuffle.

A row's key group is computed over whole Arrow columns (the function the backends use),
its subtask from the key group (Flink's ``kg * p // max_p``). Spark's
``repartition(p, col)`` puts a row in partition ``pmod(murmur3(col, 42), p)``, so each
subtask gets a route value that Spark hashes to exactly its index: partition ``i`` then
holds exactly subtask ``i``'s rows (the task checks this).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from flinkstate.state.errors import FlinkStateError
from flinkstate.state.hashing import key_group_assigner
from flinkstate.state.types import TypeInformation, to_type_info
from flinkstate.state.vectorized import assign_key_groups

_M32 = 0xFFFFFFFF


class ProcessError(FlinkStateError, ValueError):
    """A bad argument or input of the Spark runner (``process``, ``foreach_batch``)."""

    default_code = "INVALID_PROCESS_ARGUMENT"


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's ``hash(cast(value as int))``: Murmur3 x86_32 of one int (signed result)."""
    k1 = (value & _M32) * 0xCC9E2D51 & _M32
    k1 = _rotl(k1, 15) * 0x1B873593 & _M32
    h1 = seed ^ k1
    h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _M32
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _M32
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _M32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def route_values(parallelism: int) -> list[int]:
    """For each subtask, an int that Spark's hash partitioning sends to that partition."""
    found: dict[int, int] = {}
    value = 0
    while len(found) < parallelism:
        found.setdefault(spark_hash_int(value) % parallelism, value)
        value += 1
    return [found[i] for i in range(parallelism)]


def key_type_of(arrow_types: Sequence[pa.DataType], names: Sequence[str]) -> TypeInformation:
    """The key type of key columns: the column's type, or a ROW of several columns."""
    try:
        if len(arrow_types) == 1:
            return to_type_info(arrow_types[0])
        return to_type_info(pa.struct([pa.field(n, t) for n, t in zip(names, arrow_types, strict=True)]))
    except FlinkStateError as exc:
        raise ProcessError(
            f"key column(s) {list(names)} cannot be keys: {exc.detail}", code="INVALID_KEY"
        ) from exc


def key_groups(columns: Sequence[pa.Array], key_type: TypeInformation, max_parallelism: int) -> pa.Array:
    """The key group of every row's key (one column, or a ROW of several)."""
    if len(columns) == 1:
        return assign_key_groups(columns[0], key_type, max_parallelism)
    if any(c.null_count for c in columns):
        raise ProcessError("a key column holds null; keys must not be null", code="INVALID_KEY")
    assign = key_group_assigner(key_type)
    keys = zip(*(c.to_pylist() for c in columns), strict=True)
    return pa.array([assign(k, max_parallelism) for k in keys], pa.int32())


def subtasks_of(groups: pa.Array, parallelism: int, max_parallelism: int) -> np.ndarray:
    """Flink's operator index of each key group."""
    kg = groups.to_numpy(zero_copy_only=False).astype(np.int64)
    result: np.ndarray = kg * parallelism // max_parallelism
    return result


def route_udf(key_type: TypeInformation, parallelism: int, max_parallelism: int) -> Any:
    """An Arrow UDF: key column(s) -> the route value of the subtask owning each key."""
    from pyspark.sql.functions import arrow_udf  # type: ignore[attr-defined]
    from pyspark.sql.types import IntegerType

    routes = np.array(route_values(parallelism), dtype=np.int32)

    def route(*columns: pa.Array) -> pa.Array:
        groups = key_groups(columns, key_type, max_parallelism)
        return pa.array(routes[subtasks_of(groups, parallelism, max_parallelism)], pa.int32())

    return arrow_udf(route, IntegerType())
