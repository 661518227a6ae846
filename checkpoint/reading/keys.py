"""Keys and key groups given as text (read options, the command line), checked by key type.

Keys are JSON values of the state's key type: numbers for LONG/INT/SHORT/BYTE/DOUBLE/FLOAT,
strings for STRING/CHAR, ``true``/``false`` for BOOLEAN, arrays (in field order) or objects
(by field name) for ROW/TUPLE keys, arrays of byte values 0..255 for byte-array keys. Key
groups are comma-separated numbers and inclusive ranges: ``0-15,40``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.state.errors import InvalidArgumentError
from flinkstate.state.keygroups.assignment import assign_to_key_group
from flinkstate.state.types.canonical import canonical_key, canonicalizer, key_token
from flinkstate.state.types.typeinfo import BasicTypeInfo, ListTypeInfo, RowTypeInfo, TypeInformation

_INT_BITS = {"BYTE": 8, "SHORT": 16, "INT": 32, "LONG": 64}


def _bad(option: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"option {option}: {message}", code="INVALID_OPTION")


def parse_id_set(spec: str, option: str) -> frozenset[int]:
    """``"0-15,40"`` as a set of ints (key groups, subtasks); malformed text names ``option``."""
    out: set[int] = set()
    for part in (p.strip() for p in spec.split(",")):
        try:
            low, _, high = part.partition("-")
            first = int(low)
            last = int(high) if high else first
        except ValueError:
            raise _bad(option, f"expected numbers and ranges such as 0-15,40, got {spec!r}") from None
        if first < 0 or last < first:
            raise _bad(option, f"{part!r} is not a range of non-negative numbers (low-high)")
        out.update(range(first, last + 1))
    return frozenset(out)


def check_ids_below(ids: Iterable[int], limit: int, option: str, what: str) -> None:
    """Every id must be below ``limit`` (e.g. key groups below max parallelism)."""
    bad = sorted(i for i in ids if i >= limit)
    if bad:
        raise _bad(option, f"{what} {bad[:5]} do not exist: valid are 0-{limit - 1}")


def parse_json_keys(text: str, option: str) -> list[Any]:
    """A JSON list of keys (checked against a key type later by :func:`keys_of_type`)."""
    try:
        values = json.loads(text)
    except ValueError as exc:
        raise _bad(option, f'expected a JSON list of keys, e.g. ["a", "b"] or [1, 2]: {exc}') from None
    if not isinstance(values, list):
        raise _bad(option, f"expected a JSON list of keys, got {text!r}")
    return values


def keys_of_type(values: Sequence[Any], key_type: TypeInformation | None, option: str) -> list[Any]:
    """``values`` (JSON-decoded; ``NaN`` is a float) as keys of ``key_type``, each once, in
    canonical form (:mod:`flinkstate.state.types.canonical`: one NaN, ``-0.0`` apart from ``0.0``);
    a key that does not fit names itself."""
    if key_type is None:
        raise _bad(option, "this state has no key type recorded, so keys cannot be selected")
    keys = (canonical_key(_coerce(v, key_type, option, v), key_type) for v in values)
    return list(dict.fromkeys(keys))


def _coerce(value: Any, t: TypeInformation, option: str, whole: Any) -> Any:
    def wrong() -> InvalidArgumentError:
        return _bad(option, f"key {json.dumps(whole)} is not a {t} key")

    if value is None:
        raise wrong()
    if isinstance(t, BasicTypeInfo):
        if t.name in _INT_BITS:
            bits = _INT_BITS[t.name]
            if type(value) is not int or not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
                raise wrong()
            return value
        if t.name in ("DOUBLE", "FLOAT"):
            if type(value) not in (int, float):
                raise wrong()
            if t.name == "DOUBLE":
                return float(value)
            try:  # the FLOAT nearest the number: what the key stores and is compared as
                single: float = struct.unpack("<f", struct.pack("<f", value))[0]
            except OverflowError:
                raise wrong() from None
            return single
        if t.name == "BOOLEAN":
            if type(value) is not bool:
                raise wrong()
            return value
        if t.name in ("STRING", "CHAR"):
            if type(value) is not str or (t.name == "CHAR" and len(value.encode("utf-16-le")) != 2):
                raise wrong()
            return value
        raise _bad(option, f"keys of type {t} cannot be given as JSON")
    if isinstance(t, ListTypeInfo) and t.is_bytes:
        if not isinstance(value, list) or not all(type(b) is int and 0 <= b < 256 for b in value):
            raise wrong()
        return bytes(value)
    if isinstance(t, RowTypeInfo):
        if isinstance(value, dict):
            if set(value) != set(t.field_names):
                raise wrong()
            value = [value[n] for n in t.field_names]
        if not isinstance(value, list) or len(value) != len(t.field_types):
            raise wrong()
        return tuple(
            None if v is None and t.kind == "ROW" else _coerce(v, ft, option, whole)
            for v, ft in zip(value, t.field_types, strict=True)
        )
    raise _bad(option, f"keys of type {t} cannot be given as JSON")


def key_groups_of(keys: Iterable[Any], key_type: TypeInformation, max_parallelism: int) -> frozenset[int]:
    """The key groups ``keys`` (of ``key_type``) belong to."""
    return frozenset(assign_to_key_group(k, max_parallelism, key_type) for k in keys)


def key_mask(column: pa.ChunkedArray | pa.Array, keys: Sequence[Any], key_type: TypeInformation) -> pa.Array:
    """A boolean mask: which rows of a ``key`` column hold one of ``keys`` (the same key by
    Flink's rule: :func:`~flinkstate.state.types.canonical.key_token`)."""
    if isinstance(key_type, RowTypeInfo) or canonicalizer(key_type) is not None:
        # Arrow cannot test structs, and tells NaNs of other bits apart: compare by the rule
        wanted = {key_token(k) for k in keys}
        rows = column.to_pylist()
        return pa.array([r is not None and key_token(r) in wanted for r in rows], pa.bool_())
    return pc.is_in(column, value_set=pa.array(list(keys), key_type.to_arrow()))


def rows_of_keys(table: pa.Table, keys: Sequence[Any], key_type: TypeInformation) -> pa.Table:
    """The rows of ``table`` whose ``key`` is one of ``keys`` (:func:`key_mask`)."""
    return table.filter(key_mask(table.column("key"), keys, key_type))
