"""Flink's key groups of Tuple, Row and POJO keys: the Java ``hashCode()`` of the object a key
becomes in Flink, which ``murmurHash(hashCode) % max parallelism`` places.

- Atomic keys: Java's hash codes (:mod:`flinkstate.state.keygroups.hashing`).
- ``TupleN`` (``Tuple.hashCode``): ``h = hash(f0)``, then ``h = 31 * h + hash(fi)``.
- ``Row`` (``RowUtils.deepHashCodeRow``, positional rows as Flink's RowSerializer reads them,
  whatever their field names): ``31 * kind + deep(fields)`` with kind INSERT (0), where
  ``deep(fields)`` starts at 1 and adds ``31 * h`` plus each field's deep hash: 0 for null,
  ``31 + hashCode()`` otherwise.
- POJO: ``Objects.hash`` over the fields the type's ``hash_fields`` names (a POJO's
  ``hashCode()`` is the user's; without ``hash_fields`` it cannot be reproduced).

A component that is no key type in Flink (byte[], List, Map: ``keyBy`` refuses them) is
refused, never placed in a group Flink would not look in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flinkstate.state.errors import StateTypeError
from flinkstate.state.keygroups.hashing import java_hashed, key_group_assigner, key_hash_code, murmur_hash
from flinkstate.state.serializers.base import as_sequence
from flinkstate.state.types.mapping import (
    BasicTypeInfo,
    PojoTypeInfo,
    RowTypeInfo,
    TypeInformation,
)

from ..errors import UnsupportedFlinkWriteError

_M32 = 0xFFFFFFFF
_ROW_KIND_INSERT = 0


def _int32(h: int) -> int:
    h &= _M32
    return h - (1 << 32) if h & 0x8000_0000 else h


def check_key_type(t: TypeInformation, what: str) -> None:
    """Refuse a key type whose Java hash code :func:`java_hash_code` cannot give."""
    if isinstance(t, BasicTypeInfo) and java_hashed(t):
        return
    if isinstance(t, PojoTypeInfo):
        if t.hash_fields is None:
            raise UnsupportedFlinkWriteError(
                f"{what}: the POJO {t.java_class} hashes as its own hashCode() says; state the fields it "
                "covers (Types.POJO(..., hash_fields=[...]) for Objects.hash over them)"
            )
        for name in t.hash_fields:
            check_key_type(t.field_types[t.field_names.index(name)], f"{what}, field {name}")
        return
    if isinstance(t, RowTypeInfo):
        for name, field in zip(t.field_names, t.field_types, strict=True):
            check_key_type(field, f"{what}, field {name}")
        return
    raise UnsupportedFlinkWriteError(
        f"{what}: type {t} is no key type Flink places by a reproducible hashCode() (keys are atomic, "
        "Tuple, Row or POJO)"
    )


def java_hash_code(value: Any, t: TypeInformation) -> int:
    """The ``hashCode()`` of ``value`` as the Flink object of type ``t`` (checked by
    :func:`check_key_type`)."""
    if not isinstance(t, RowTypeInfo):
        return key_hash_code(value, t)
    fields = as_sequence(value, f"a {t} key")
    if len(fields) != len(t.field_types):
        raise StateTypeError(f"a key of {t} has {len(t.field_types)} fields, got {value!r}")
    if isinstance(t, PojoTypeInfo):  # Objects.hash(hash fields...)
        h = 1
        for name in t.hash_fields or ():
            i = t.field_names.index(name)
            h = 31 * h + (0 if fields[i] is None else java_hash_code(fields[i], t.field_types[i]))
        return _int32(h)
    if t.kind == "TUPLE":
        h = 0
        for v, ft in zip(fields, t.field_types, strict=True):
            if v is None:
                raise StateTypeError(f"a Tuple key field is None: {value!r}")
            h = 31 * h + java_hash_code(v, ft)
        return _int32(h)
    h = 1
    for v, ft in zip(fields, t.field_types, strict=True):
        h = 31 * h + (0 if v is None else 31 + java_hash_code(v, ft))
    return _int32(31 * _ROW_KIND_INSERT + h)


def flink_key_group_assigner(key_type: TypeInformation) -> Callable[[Any, int], int]:
    """``(key, max_parallelism) -> key group`` as Flink assigns it (atomic keys: the fastest
    assigner we have)."""
    if java_hashed(key_type):
        return key_group_assigner(key_type)
    return lambda key, max_p: murmur_hash(java_hash_code(key, key_type)) % max_p
