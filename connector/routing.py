"""Routing rows to the subtasks that own their key groups, with Spark's own shuffle.

A row's key group is computed over whole Arrow columns (the function the backends use),
or, for integral and boolean keys, by a native Spark expression spelling out Java's
``hashCode`` and Flink's murmur hash in 64-bit arithmetic that cannot overflow (no Python
pass over the rows); its subtask from the key group (Flink's ``kg * p // max_p``). Spark's
``repartition(p, col)`` puts a row in partition ``pmod(murmur3(col, 42), p)``, so each
subtask gets a route value that Spark hashes to exactly its index: partition ``i`` then
holds exactly subtask ``i``'s rows (the task checks this).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


_INTEGRAL_KEYS = ("BYTE", "SHORT", "INT", "LONG", "BOOLEAN")
_MIN_INT = -(1 << 31)


def _mul32(x: Any, constant: int) -> Any:
    """``x * constant`` modulo 2**32 for ``0 <= x < 2**32``, in products below 2**49."""
    lo, hi = constant & 0xFFFF, constant >> 16
    return (x * lo + ((x * hi).bitwiseAND(0xFFFF) * (1 << 16))).bitwiseAND(_M32)


def _rotl32(x: Any, r: int) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    return F.shiftleft(x, r).bitwiseAND(_M32).bitwiseOR(F.shiftrightunsigned(x, 32 - r))


def _mix(x: Any, shift: int) -> Any:
    from pyspark.sql import functions as F  # noqa: N812

    return x.bitwiseXOR(F.shiftrightunsigned(x, shift))


def _java_hash(name: str, column: Any) -> Any:
    """Java's ``hashCode`` of a key column as an unsigned 32-bit value (a bigint)."""
    from pyspark.sql import functions as F  # noqa: N812

    if name == "BOOLEAN":
        return F.when(column, F.lit(1231)).otherwise(F.lit(1237)).cast("bigint")
    v = column.cast("bigint")
    if name == "LONG":
        return v.bitwiseXOR(F.shiftrightunsigned(v, 32)).bitwiseAND(_M32)
    return v.bitwiseAND(_M32)


def with_key_group(
    df: Any, key_column: str, key_type: TypeInformation, max_parallelism: int, name: str
) -> Any | None:
    """``df`` with column ``name``: Flink's key group of a BYTE/SHORT/INT/LONG/BOOLEAN key
    column as native expressions (``None`` for other key types): Java's ``hashCode``, then
    Flink's ``MathUtils.murmurHash`` and ``% max_parallelism``; a null key gives null.

    One projection per step that reads its input twice: nested into one expression, the
    tree would double at each of them."""
    from pyspark.sql import functions as F  # noqa: N812

    kind = getattr(key_type, "name", None)
    if kind not in _INTEGRAL_KEYS:
        return None
    steps: list[Callable[[Any], Any]] = [
        lambda x: _mul32(x, 0xCC9E2D51),
        lambda x: _rotl32(x, 15),
        lambda x: _mul32(x, 0x1B873593),
        lambda x: (_rotl32(x, 13) * 5 + 0xE6546B64).bitwiseAND(_M32).bitwiseXOR(4),
        lambda x: _mix(x, 16),
        lambda x: _mul32(x, 0x85EBCA6B),
        lambda x: _mix(x, 13),
        lambda x: _mul32(x, 0xC2B2AE35),
        lambda x: _mix(x, 16),
        lambda x: F.when(x >= 1 << 31, x - (1 << 32)).otherwise(x),  # as Java's signed int
        lambda x: F.when(x >= 0, x).when(x != _MIN_INT, -x).otherwise(F.lit(0).cast("bigint")),
        lambda x: x % max_parallelism,
    ]
    df = df.withColumn(name, _java_hash(kind, F.col(key_column)))
    for step in steps:
        df = df.withColumn(name, step(F.col(name)))
    return df


def with_route(
    df: Any,
    key_columns: Sequence[str],
    key_type: TypeInformation,
    parallelism: int,
    max_parallelism: int,
    name: str,
) -> Any:
    """``df`` with column ``name``: the route value of every row's key, natively for one
    integral or boolean key column, else by :func:`route_udf`. A null key fails the run
    (``INVALID_KEY``)."""
    from pyspark.sql import functions as F  # noqa: N812

    grouped = None
    if len(key_columns) == 1:
        grouped = with_key_group(df, key_columns[0], key_type, max_parallelism, name)
    if grouped is None:
        return df.withColumn(name, route_udf(key_type, parallelism, max_parallelism)(*key_columns))
    subtask = F.floor(F.col(name) * parallelism / max_parallelism).cast("int")  # exact: < 2**30
    routes = F.array(*[F.lit(v) for v in route_values(parallelism)])
    message = f"ProcessError: [INVALID_KEY] key column {key_columns[0]!r} holds null; keys must not be null"
    route = F.when(F.col(key_columns[0]).isNull(), F.raise_error(F.lit(message)))
    return grouped.withColumn(name, route.otherwise(F.element_at(routes, subtask + 1)))
