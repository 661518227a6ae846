"""Indented JSON text, fast: exactly what ``json.dumps(doc, indent=1, ensure_ascii=True)`` gives.

The standard library writes indented JSON with its pure-Python encoder (its C encoder only
writes compact text), one generator step per value: for a manifest whose chains list every
key group of every file, that was a large part of an incremental checkpoint. Here each
container is one join, and a list of plain ints (a key group's ``[kg, row group, rows]``)
one join of their digits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import chain
from typing import Any

_escape = json.encoder.encode_basestring_ascii  # the C function when the accelerator is built
_INT = {int}
_SEQUENCES = {list, tuple}
_INDENTS = ["\n" + " " * level for level in range(64)]


def _indent(level: int) -> str:
    return _INDENTS[level] if level < len(_INDENTS) else "\n" + " " * level


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return _escape(key)
    if key is True or key is False or key is None:
        return _escape(json.dumps(key))
    if isinstance(key, int):
        return _escape(int.__repr__(key))
    if isinstance(key, float):
        return _escape(_float(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _value(value: Any, level: int) -> str:
    if isinstance(value, str):
        return _escape(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, (list, tuple)):
        return _sequence(value, level)
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = _indent(level + 1)
        pairs = [_key(k) + ": " + _value(v, level + 1) for k, v in value.items()]
        return "{" + inner + ("," + inner).join(pairs) + _indent(level) + "}"
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _ints(value: Any, level: int) -> str:
    """A non-empty list of plain ints."""
    inner = _indent(level + 1)
    return "[" + inner + ("," + inner).join(map(int.__repr__, value)) + _indent(level) + "]"


def _sequence(value: list[Any] | tuple[Any, ...], level: int) -> str:
    if not value:
        return "[]"
    inner = _indent(level + 1)
    kinds = set(map(type, value))
    if kinds == _INT:
        items: Iterable[str] = map(int.__repr__, value)
    elif kinds <= _SEQUENCES and all(value) and set(map(type, chain.from_iterable(value))) == _INT:
        items = [_ints(v, level + 1) for v in value]  # e.g. a file's key groups
    else:
        items = [_value(v, level + 1) for v in value]
    return "[" + inner + ("," + inner).join(items) + _indent(level) + "]"


def dumps_indented(doc: Any) -> str:
    """``json.dumps(doc, indent=1, ensure_ascii=True)``, character for character."""
    return _value(doc, 0)
