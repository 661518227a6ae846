"""Argument rules shared by every state implementation (heap, TTL, operator)."""

from __future__ import annotations

from typing import Any

from .errors import InvalidArgumentError


def checked_elements(values: Any, what: str) -> list[Any]:
    """``values`` as a new list; ``None`` or a ``None`` element is a typed error."""
    if values is None:
        raise InvalidArgumentError(f"{what}: the list of values must not be None", code="NULL_ELEMENT")
    if isinstance(values, (str, bytes)):
        raise InvalidArgumentError(
            f"{what}: expected a list of values, got {values!r}", code="INVALID_ARGUMENT"
        )
    items = list(values)
    if any(v is None for v in items):
        raise InvalidArgumentError(f"{what}: a ListState cannot hold None elements", code="NULL_ELEMENT")
    return items


def check_element(value: Any) -> None:
    if value is None:
        raise InvalidArgumentError("add: a ListState cannot hold None elements", code="NULL_ELEMENT")


def check_user_key(key: Any) -> None:
    if key is None:
        raise InvalidArgumentError("a MapState user key must not be None", code="NULL_KEY")
