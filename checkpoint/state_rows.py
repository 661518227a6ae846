"""Keyed state from Arrow rows as entries, the one way every writer of entries takes them (the
Arrow and Spark writer of Flink savepoints, the offline edits of Flink's savepoints and of
ours). The Spark writer and the streaming sink of our checkpoints write a task's rows as
state files through :mod:`.writing.state_files`.

- :func:`default_type`: the Flink type of a column no one declared a type for: int64 Long,
  int32 Integer, int16 Short, int8 Byte, bool Boolean, float64 Double, float32 Float, string
  String, binary ``byte[]``, list ``List``, map ``Map``, struct ``Row`` (the table of
  docs/spark/write.md).
- :func:`fit`: a column cast to a Flink type; a value that does not fit (a string for a
  Long, a Long out of an Integer's range, a string of two characters for a Character) is
  ``[TYPE_MISMATCH]`` naming the column, before anything is written.
- :func:`fit_keyed` and :func:`key_group_columns`: a state's rows (columns ``key``,
  ``value`` and, for a map state, ``user_key``) as each key group's entries, by one rule,
  Flink's. A value (reducing, aggregating) state keeps a key's last row, and a null value
  there stores nothing (Flink's ``update(null)`` clears); a map state keeps a (key, user
  key)'s last row, a null value included (Flink's map state holds nulls); a list state takes
  each row as an element, in row order. A null key is ``[INVALID_KEY]``, a null user key
  ``[NULL_KEY]``, a null list element ``[NULL_ELEMENT]``. Keys and user keys are the same
  when :mod:`flinkstate.state.types.canonical` says so: floats by their bits, so ``0.0``
  and ``-0.0`` are two keys (two user keys of one map) and every NaN is one.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.state.descriptors import StateKind
from flinkstate.state.errors import InvalidArgumentError
from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.keygroups.vectorized import assign_key_groups
from flinkstate.state.types.canonical import canonical_nans, canonical_values, key_token
from flinkstate.state.types.mapping import (
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    RowTypeInfo,
    TypeInformation,
    to_type_info,
)

from .arrow_codec import from_arrow
from .errors import DeclaredTypeError

_INTEGERS = ("BYTE", "SHORT", "INT", "LONG")


def default_type(t: pa.DataType) -> TypeInformation:
    """The Flink type of an undeclared Arrow column (see the module docstring)."""
    return to_type_info(t)


def _mismatch(what: str, got: pa.DataType, t: TypeInformation, why: str = "") -> DeclaredTypeError:
    return DeclaredTypeError(
        f"{what}: values of type {got} do not fit the Flink type {t}{why}", code="TYPE_MISMATCH"
    )


def _check_kind(got: pa.DataType, t: TypeInformation, what: str) -> None:
    """Refuse an Arrow type whose values are never of ``t`` (``[TYPE_MISMATCH]``)."""
    if pa.types.is_null(got):
        return
    if isinstance(t, BasicTypeInfo):
        ok = {
            "STRING": pa.types.is_string(got) or pa.types.is_large_string(got),
            "CHAR": pa.types.is_string(got) or pa.types.is_large_string(got),
            "BOOLEAN": pa.types.is_boolean(got),
            "FLOAT": pa.types.is_floating(got) or pa.types.is_integer(got),
            "DOUBLE": pa.types.is_floating(got) or pa.types.is_integer(got),
        }.get(t.name, t.name in _INTEGERS and pa.types.is_integer(got))
    elif isinstance(t, ListTypeInfo) and t.is_bytes:
        ok = pa.types.is_binary(got) or pa.types.is_large_binary(got) or pa.types.is_fixed_size_binary(got)
    elif isinstance(t, ListTypeInfo):
        ok = pa.types.is_list(got) or pa.types.is_large_list(got)
        if ok:
            _check_kind(got.value_type, t.element, f"{what} (element)")
    elif isinstance(t, MapTypeInfo):
        ok = pa.types.is_map(got)
        if ok:
            _check_kind(got.key_type, t.key, f"{what} (map key)")
            _check_kind(got.item_type, t.value, f"{what} (map value)")
    elif isinstance(t, RowTypeInfo):
        ok = pa.types.is_struct(got) and got.num_fields == len(t.field_types)
        for i, f in enumerate(t.field_types if ok else ()):
            _check_kind(got.field(i).type, f, f"{what} (field {t.field_names[i]})")
    else:
        ok = True  # other types: the cast decides
    if not ok:
        raise _mismatch(what, got, t)


def _renamed(got: pa.DataType, t: TypeInformation) -> pa.DataType:
    """``t``'s Arrow type with the field names of ``got`` (struct casts match fields by name)."""
    target: pa.DataType = t.to_arrow()
    if isinstance(t, RowTypeInfo) and pa.types.is_struct(got):
        return pa.struct(
            [pa.field(got.field(i).name, _renamed(got.field(i).type, f)) for i, f in enumerate(t.field_types)]
        )
    if isinstance(t, ListTypeInfo) and not t.is_bytes and pa.types.is_list(got):
        return pa.list_(_renamed(got.value_type, t.element))
    if isinstance(t, MapTypeInfo) and pa.types.is_map(got):
        return pa.map_(_renamed(got.key_type, t.key), _renamed(got.item_type, t.value))
    return target


def _check_chars(values: pa.Array, what: str, t: TypeInformation) -> None:
    """A Character is one UTF-16 unit: a string of one character below U+10000."""
    lengths = pc.utf8_length(values)
    bad = pc.and_(pc.is_valid(values), pc.not_equal(pc.fill_null(lengths, 1), 1))
    first: Any = None
    if pc.any(bad).as_py():
        first = pc.filter(values, bad)[0].as_py()
    else:
        wide = [v for v in values.to_pylist() if v is not None and ord(v) > 0xFFFF]
        first = wide[0] if wide else None
    if first is not None:
        raise _mismatch(what, values.type, t, f" (a Java char is one UTF-16 unit, got {first!r})")


def fit(values: pa.Array | pa.ChunkedArray, t: TypeInformation, what: str) -> pa.Array:
    """``values`` as ``t``'s Arrow type; ``[TYPE_MISMATCH]`` naming ``what`` when a value does
    not fit (a wrong kind of value, an integer out of range, a float that is not exact)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    _check_kind(values.type, t, what)
    renamed = _renamed(values.type, t)
    try:
        out = values.cast(renamed, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise _mismatch(what, values.type, t, f": {exc}") from exc
    if isinstance(t, BasicTypeInfo) and t.name == "CHAR":
        _check_chars(out, what, t)
    target = t.to_arrow()
    if renamed != target:
        try:
            out = out.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise _mismatch(what, values.type, t, f": {exc}") from exc
    return out


def fit_keys(values: pa.Array | pa.ChunkedArray, t: TypeInformation, what: str, null_code: str) -> pa.Array:
    """Keys (user keys) fitted to ``t``, every NaN with the one NaN's bits; a null is
    ``null_code``."""
    out = canonical_nans(fit(values, t, what))
    if out.null_count:
        raise InvalidArgumentError(f"{what}: {out.null_count} row(s) hold a null", code=null_code)
    return out


def refuse_null_elements(values: pa.Array, what: str) -> None:
    """A list state's elements (an operator list state's too): none null (``[NULL_ELEMENT]``)."""
    if values.null_count:
        raise InvalidArgumentError(
            f"{what}: {values.null_count} row(s) hold a null value: a list state cannot hold None elements",
            code="NULL_ELEMENT",
        )


def fit_keyed(
    table: pa.Table,
    kind: StateKind,
    key_type: TypeInformation,
    value_type: TypeInformation,
    user_key_type: TypeInformation | None,
    what: str,
) -> pa.Table:
    """A keyed state's rows with their columns fitted to its types, ready for
    :func:`key_group_columns` (see the module docstring for what is refused)."""
    cols = {"key": fit_keys(table.column("key"), key_type, f"{what}, key", "INVALID_KEY")}
    if kind is StateKind.MAP:
        assert user_key_type is not None
        cols["user_key"] = fit_keys(table.column("user_key"), user_key_type, f"{what}, user_key", "NULL_KEY")
    cols["value"] = fit(table.column("value"), value_type, f"{what}, value")
    if kind is StateKind.LIST:
        refuse_null_elements(cols["value"], what)
    return pa.table(cols)


def _distinct(keys: pa.ChunkedArray) -> bool:
    """Whether no two keys are equal (False also where Arrow cannot tell: the general path decides)."""
    try:
        return bool(pc.count_distinct(keys, mode="all").as_py() == len(keys))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return False


def key_group_columns(
    table: pa.Table,
    kind: StateKind,
    key_type: TypeInformation,
    value_type: TypeInformation,
    user_key_type: TypeInformation | None,
    max_parallelism: int,
    now: int | None,
) -> Iterator[tuple[int, StateColumns]]:
    """The rows of :func:`fit_keyed` as each key group's entries, in key-group order, keys
    (user keys) in canonical form; ``now``: with TTL, every entry's last access."""
    group_array = assign_key_groups(table.column("key"), key_type, max_parallelism)
    if kind not in (StateKind.LIST, StateKind.MAP) and _distinct(table.column("key")):
        yield from _distinct_values(
            table, group_array.to_numpy(zero_copy_only=False), key_type, value_type, now
        )
        return
    keys = canonical_values(from_arrow(table.column("key"), key_type), key_type)
    values = from_arrow(table.column("value"), value_type)
    user_keys: list[Any] = [None] * len(keys)
    if kind is StateKind.MAP:
        assert user_key_type is not None
        user_keys = canonical_values(from_arrow(table.column("user_key"), user_key_type), user_key_type)
    by_group: dict[int, dict[Any, list[Any]]] = {}  # key group -> key token -> [key, value]
    for kg, key, user_key, value in zip(group_array.to_pylist(), keys, user_keys, values, strict=True):
        entry = by_group.setdefault(kg, {}).setdefault(key_token(key), [key, None])
        if kind is StateKind.LIST:
            entry[1] = entry[1] if entry[1] is not None else []
            entry[1].append(value)
        elif kind is StateKind.MAP:
            entry[1] = entry[1] if entry[1] is not None else {}
            entry[1][user_key] = value  # canonical: 0.0 and -0.0 two entries, every NaN one
        else:
            entry[1] = value
    for kg in sorted(by_group):
        entries = [e for e in by_group[kg].values() if e[1] is not None]  # a null value stores nothing
        if entries:
            yield (
                kg,
                StateColumns(
                    [e[0] for e in entries], None, [e[1] for e in entries], _stamps(kind, entries, now)
                ),
            )


def _stamps(kind: StateKind, entries: list[list[Any]], now: int | None) -> list[Any] | None:
    """Each value's (element's, map entry's) last-access timestamp: ``now``."""
    if now is None:
        return None
    if kind is StateKind.LIST:
        return [[now] * len(e[1]) for e in entries]
    if kind is StateKind.MAP:
        return [dict.fromkeys(e[1], now) for e in entries]
    return [now] * len(entries)


def _distinct_values(
    table: pa.Table,
    groups: np.ndarray,
    key_type: TypeInformation,
    value_type: TypeInformation,
    now: int | None,
) -> Iterator[tuple[int, StateColumns]]:
    """A value state whose keys are distinct: each key group's rows, without a dictionary."""
    valid = table.column("value").is_valid()
    if not pc.all(valid).as_py():  # a null value stores nothing
        table, groups = table.filter(valid), groups[valid.to_numpy(zero_copy_only=False)]
    order = np.argsort(groups, kind="stable")
    ordered = groups[order]
    take = pa.array(order, pa.int64())
    keys = canonical_values(from_arrow(table.column("key").take(take), key_type), key_type)
    values = from_arrow(table.column("value").take(take), value_type)
    bounds = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist(), len(ordered)]
    for start, end in itertools.pairwise(bounds):
        if start < end:
            stamps = [now] * (end - start) if now is not None else None
            yield int(ordered[start]), StateColumns(keys[start:end], None, values[start:end], stamps)
