"""How restored entries become stored states of a heap table, and how they migrate.

A stored state is the value (VALUE, REDUCING, AGGREGATING), a list (LIST) or a dict
(MAP); with TTL each value, element or map value is a ``(timestamp, value)`` tuple.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..descriptors import StateKind
from ..keyed.migration import Migrate
from ..keyed.snapshot import StateColumns, StateMetaInfo
from ..ttl.factory import ttl_value_type
from ..types.mapping import ListTypeInfo, MapTypeInfo, TypeInformation


def stored_type_of(meta: StateMetaInfo) -> TypeInformation:
    """The type of one stored state of ``meta`` (TTL-wrapped when it has TTL)."""
    value = meta.value_type if meta.ttl is None else ttl_value_type(meta.value_type)
    if meta.kind is StateKind.LIST:
        return ListTypeInfo(value)
    if meta.kind is StateKind.MAP:
        assert meta.user_key_type is not None
        return MapTypeInfo(meta.user_key_type, value)
    return value


def stored_states(meta: StateMetaInfo, columns: StateColumns) -> list[Any]:
    """The stored states for restored columns (values and, with TTL, timestamps)."""
    values = columns.values
    if not values:  # nothing in this key group (a TTL state's empty columns carry no timestamps)
        return []
    if meta.ttl is None:
        if meta.kind is StateKind.LIST:
            return [list(v) for v in values]
        if meta.kind is StateKind.MAP:
            return [dict(v) for v in values]
        return list(values)
    stamps = columns.timestamps
    assert stamps is not None, f"state {meta.name!r} has TTL but no timestamps were restored"
    if meta.kind is StateKind.LIST:
        return [list(zip(ts, v, strict=True)) for v, ts in zip(values, stamps, strict=True)]
    if meta.kind is StateKind.MAP:
        return [{k: (ts[k], x) for k, x in v.items()} for v, ts in zip(values, stamps, strict=True)]
    return list(zip(stamps, values, strict=True))


def stored_migration(
    meta: StateMetaInfo, value: Migrate | None, user_key: Migrate | None
) -> Callable[[Any], Any] | None:
    """A function migrating one stored state of ``meta``; ``None`` when nothing changes."""
    if value is None and user_key is None:
        return None
    v: Migrate = value or (lambda x: x)
    k: Migrate = user_key or (lambda x: x)
    ttl = meta.ttl is not None
    if meta.kind is StateKind.LIST:
        if ttl:
            return lambda s: [(e[0], v(e[1])) for e in s]
        return lambda s: [v(e) for e in s]
    if meta.kind is StateKind.MAP:
        if ttl:
            return lambda s: {k(a): (e[0], None if e[1] is None else v(e[1])) for a, e in s.items()}
        return lambda s: {k(a): None if e is None else v(e) for a, e in s.items()}
    if ttl:
        return lambda s: (s[0], v(s[1]))
    return v
