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

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from flinkstate.state import FlinkStateError, TypeInformation
from flinkstate.state.keygroups import assign_key_groups, key_group_assigner
from flinkstate.state.types import to_type_info

from ..errors import ProcessError

_M32 = 0xFFFFFFFF


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
_SEED_ZERO = -1693959553
"""The int whose Murmur3 hash with Spark's seed (42) is 0: Spark's ``hash(_SEED_ZERO, c)``
is Murmur3 of int ``c`` with seed 0, which is Flink's ``MathUtils.murmurHash(c)`` before its
absolute value."""


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _java_hash(kind: str, column: str) -> str:
    """Java's ``hashCode`` of a key column (an int)."""
    if kind == "BOOLEAN":
        return f"CASE WHEN {column} THEN 1231 ELSE 1237 END"
    if kind != "LONG":
        return f"CAST({column} AS INT)"
    v = f"CAST({column} AS BIGINT)"
    unsigned = f"(({v} ^ shiftrightunsigned({v}, 32)) & {_M32})"  # (int)(v ^ (v >>> 32))
    return f"CAST(CASE WHEN {unsigned} >= {1 << 31} THEN {unsigned} - {1 << 32} ELSE {unsigned} END AS INT)"


def _key_group(kind: str, column: str, max_parallelism: int) -> str:
    """Flink's key group of ``column`` as a Spark SQL expression (null for a null key)."""
    murmur = f"hash(CAST({_SEED_ZERO} AS INT), {_java_hash(kind, column)})"
    positive = f"CASE WHEN {murmur} = {-(1 << 31)} THEN 0L ELSE abs(CAST({murmur} AS BIGINT)) END"
    return f"CASE WHEN {column} IS NULL THEN NULL ELSE {positive} % {max_parallelism} END"


def key_group_column(key_column: str, key_type: TypeInformation, max_parallelism: int) -> Any | None:
    """Flink's key group of a BYTE/SHORT/INT/LONG/BOOLEAN key column as one native Spark
    expression (``None`` for other key types): Java's ``hashCode``, then Flink's
    ``MathUtils.murmurHash`` (Spark's Murmur3 at seed 0) and ``% max_parallelism``; a null
    key gives null."""
    from pyspark.sql import functions as F  # noqa: N812

    kind = getattr(key_type, "name", None)
    if kind not in _INTEGRAL_KEYS:
        return None
    return F.expr(_key_group(kind, _quote(key_column), max_parallelism))


def route_column(
    key_columns: Sequence[str], key_type: TypeInformation, parallelism: int, max_parallelism: int
) -> Any:
    """The route value of every row's key: natively for one integral or boolean key column,
    else by :func:`route_udf`. A null key fails the run (``INVALID_KEY``)."""
    from pyspark.sql import functions as F  # noqa: N812

    kind = getattr(key_type, "name", None)
    if len(key_columns) != 1 or kind not in _INTEGRAL_KEYS:
        return route_udf(key_type, parallelism, max_parallelism)(*key_columns)
    column = _quote(key_columns[0])
    routes = ", ".join(str(v) for v in route_values(parallelism))
    message = _sql_string(
        f"ProcessError: [INVALID_KEY] key column {key_columns[0]!r} holds null; keys must not be null"
    )
    group = _key_group(kind, column, max_parallelism)
    subtask = f"CAST(FLOOR(({group}) * {parallelism} / {max_parallelism}) AS INT)"  # exact: < 2**30
    routed = f"element_at(array({routes}), {subtask} + 1)"
    return F.expr(f"CASE WHEN {column} IS NULL THEN raise_error({message}) ELSE {routed} END")


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
