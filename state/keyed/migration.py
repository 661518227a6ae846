"""State schema evolution: which type changes a restored state survives, and how.

Compatible changes migrate (widening integers and floats, LIST/MAP/ROW whose parts
migrate, a ROW with nullable fields added at the end); anything else is a
``[STATE_MIGRATION]`` error that says what changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import StateConflictError, StateMigrationError
from ..types.typeinfo import BasicTypeInfo, ListTypeInfo, MapTypeInfo, RowTypeInfo, TypeInformation
from .snapshot import StateMetaInfo

Migrate = Callable[[Any], Any]

_WIDENINGS = {
    ("BYTE", "SHORT"),
    ("BYTE", "INT"),
    ("BYTE", "LONG"),
    ("SHORT", "INT"),
    ("SHORT", "LONG"),
    ("INT", "LONG"),
    ("FLOAT", "DOUBLE"),
    ("CHAR", "STRING"),
}


def _identity(value: Any) -> Any:
    return value


def migrator(old: TypeInformation, new: TypeInformation, what: str) -> Migrate | None:
    """A function turning values of ``old`` into ``new``; ``None`` when nothing changes.

    Raises :class:`StateMigrationError` naming ``what`` when the change is incompatible.
    """
    if old == new:
        return None
    if isinstance(old, BasicTypeInfo) and isinstance(new, BasicTypeInfo):
        if (old.name, new.name) in _WIDENINGS:
            return float if new.name == "DOUBLE" else None
    elif isinstance(old, ListTypeInfo) and isinstance(new, ListTypeInfo) and old.kind == new.kind:
        inner = migrator(old.element, new.element, what)
        if old.is_bytes == new.is_bytes:
            return None if inner is None else (lambda v: [None if e is None else inner(e) for e in v])
    elif isinstance(old, MapTypeInfo) and isinstance(new, MapTypeInfo):
        key = migrator(old.key, new.key, what) or _identity
        value = migrator(old.value, new.value, what) or _identity
        return lambda v: {key(k): None if x is None else value(x) for k, x in v.items()}
    elif isinstance(old, RowTypeInfo) and isinstance(new, RowTypeInfo) and old.kind == new.kind:
        return _row_migrator(old, new, what)
    raise StateMigrationError(f"{what}: the stored type {old} cannot be read as {new}")


def _row_migrator(old: RowTypeInfo, new: RowTypeInfo, what: str) -> Migrate:
    n = len(old.field_types)
    if new.field_names[:n] != old.field_names:
        raise StateMigrationError(
            f"{what}: the fields of {old} cannot be read as {new} (fields may only be added at the end)"
        )
    if len(new.field_names) > n and new.kind != "ROW":
        raise StateMigrationError(f"{what}: fields cannot be added to a TUPLE ({old} to {new})")
    fields = [
        migrator(o, t, what) or _identity for o, t in zip(old.field_types, new.field_types, strict=False)
    ]
    added = (None,) * (len(new.field_names) - n)
    return lambda v: tuple(None if x is None else f(x) for f, x in zip(fields, v, strict=True)) + added


def check_same_kind(old: StateMetaInfo, new: StateMetaInfo) -> None:
    if old.kind is not new.kind:
        raise StateConflictError(
            f"state {old.name!r} is a {old.kind.value} state and cannot be used as a {new.kind.value} state",
            code="STATE_KIND_CONFLICT",
        )
    if (old.ttl is None) != (new.ttl is None):
        raise StateMigrationError(
            f"state {old.name!r} was registered {'with' if old.ttl else 'without'} TTL; "
            "it cannot be used " + ("without" if old.ttl else "with") + " TTL"
        )


def check_registered(old: StateMetaInfo, new: StateMetaInfo) -> None:
    """A live state is fetched again: kind, types and TTL must be the same."""
    check_same_kind(old, new)
    if (old.value_type, old.user_key_type) != (new.value_type, new.user_key_type):
        raise StateMigrationError(
            f"state {old.name!r} has type {old.value_type}"
            + (f" (user key {old.user_key_type})" if old.user_key_type else "")
            + f"; it cannot be used with type {new.value_type}"
            + (f" (user key {new.user_key_type})" if new.user_key_type else "")
        )


def restored_migrators(old: StateMetaInfo, new: StateMetaInfo) -> tuple[Migrate | None, Migrate | None]:
    """A restored state is registered: (value migrator, user key migrator), or an error."""
    check_same_kind(old, new)
    what = f"state {old.name!r}"
    value = migrator(old.value_type, new.value_type, what)
    user_key = None
    if old.user_key_type is not None and new.user_key_type is not None:
        user_key = migrator(old.user_key_type, new.user_key_type, what + " (user key)")
    return value, user_key
