"""One key group's rows from several files (or with deletes) as the entries they apply.

Files written at once hold each scope once; a key group can still span files: written by
several Spark tasks, or upserted by streaming batches (whose rows may delete).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.state.descriptors import StateKind
from flinkstate.state.keyed.snapshot import StateColumns, StateMetaInfo
from flinkstate.state.types.canonical import canonical_values
from flinkstate.state.types.typeinfo import TypeInformation

from ..arrow_codec import from_arrow
from ..errors import CheckpointCorruptError
from ..format import keyed_columns, storage_table

DELETE = 1


def combine_key_group(tables: list[pa.Table], meta: StateMetaInfo) -> pa.Table | None:
    """Several files' rows of one key group as one table, when applying them in order is
    just concatenating them: no deletes and no scope in more than one row. Else ``None``."""
    if any("op" in t.column_names for t in tables):
        return None
    try:
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        if len(tables) == 1:
            return table
        scope = [c for c in ("key", "namespace", "user_key") if c in table.column_names]
        if meta.kind is not StateKind.MAP and "user_key" in scope:
            scope.remove("user_key")
        if "namespace" in scope and table.column("namespace").null_count == table.num_rows:
            scope.remove("namespace")  # the void namespace everywhere
        if len(scope) == 1:  # a hash set of one column: several times cheaper than group_by
            groups = len(pc.unique(table.column(scope[0])))
        else:
            groups = table.group_by(scope, use_threads=False).aggregate([]).num_rows
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return table if groups == table.num_rows else None


RESTORE_SLICE = 131_072
"""Rows :func:`merge_keyed_slices` decodes at a time."""


def merge_keyed(
    tables: list[pa.Table], meta: StateMetaInfo, key_type: TypeInformation, allow_pickle: bool
) -> StateColumns:
    """The entries of one key group held in several files (or with deletes), applied in order."""
    plain, rest = _plan(tables, meta)
    return _merged(plain, rest, meta, key_type, allow_pickle)


def merge_keyed_slices(
    tables: list[pa.Table],
    meta: StateMetaInfo,
    key_type: TypeInformation,
    allow_pickle: bool,
) -> Iterator[StateColumns]:
    """:func:`merge_keyed`'s entries in slices of at most :data:`RESTORE_SLICE` rows, to apply one after
    the other, when the rows apply by concatenation (no deletes, no scope twice) and not to
    a MAP (whose rows of one scope fold together); else all at once."""
    plain, rest = _plan(tables, meta)
    if rest or plain is None or meta.kind is StateKind.MAP:
        yield _merged(plain, rest, meta, key_type, allow_pickle)
        return
    for start in range(0, plain.num_rows, RESTORE_SLICE):
        yield keyed_columns(plain.slice(start, RESTORE_SLICE), meta, key_type, allow_pickle)


def _merged(
    plain: pa.Table | None,
    rest: list[pa.Table],
    meta: StateMetaInfo,
    key_type: TypeInformation,
    allow_pickle: bool,
) -> StateColumns:
    fast = None if plain is None else keyed_columns(plain, meta, key_type, allow_pickle)
    if not rest:
        assert fast is not None
        return fast
    slow = _apply_rows(rest, meta, key_type, allow_pickle)
    return slow if fast is None else _concat(fast, slow)


def merged_key_group(
    tables: list[pa.Table], meta: StateMetaInfo, key_type: TypeInformation, key_group: int, allow_pickle: bool
) -> pa.Table:
    """One key group's entries from several files (or with deletes), applied in order, as one
    table in the stored layout (what a compaction writes)."""
    return storage_table(meta, key_type, key_group, merge_keyed(tables, meta, key_type, allow_pickle))


def stored_key_group(
    tables: list[pa.Table],
    meta: StateMetaInfo,
    key_type: TypeInformation | None,
    key_group: int,
    allow_pickle: bool,
) -> pa.Table:
    """One key group's rows from several files as one table in the stored layout: their
    concatenation where that is how they apply (:func:`combine_key_group`), else
    :func:`merged_key_group` (which needs the key type)."""
    table = combine_key_group(tables, meta)
    if table is not None:
        return table
    if key_type is None:
        raise CheckpointCorruptError(f"state {meta.name!r} has rows but its operator has no key type")
    return merged_key_group(tables, meta, key_type, key_group, allow_pickle)


def count_keyed(
    tables: list[pa.Table], meta: StateMetaInfo, key_type: TypeInformation, allow_pickle: bool
) -> int:
    """How many entries :func:`merge_keyed` gives (MAP: one per map entry, else one per key and
    namespace), decoding only the rows it applies one by one (a plain file is counted in Arrow)."""
    plain, rest = _plan(tables, meta)
    count = 0 if plain is None else plain.num_rows
    if rest:
        merged = _apply_rows(rest, meta, key_type, allow_pickle)
        count += sum(len(v) for v in merged.values) if meta.kind is StateKind.MAP else len(merged.values)
    return count


def _plan(tables: list[pa.Table], meta: StateMetaInfo) -> tuple[pa.Table | None, list[pa.Table]]:
    """(the rows that apply by concatenation, without the rows that store nothing; the rows
    to apply one by one after them, in order)."""
    combined = combine_key_group(tables, meta)
    if combined is not None:
        return _stored(combined, meta), []
    split = _split_untouched(tables, meta)
    if split is not None:  # a base with a few changes: only the changed keys' rows go row by row
        untouched, rest = split
        return _stored(untouched, meta), rest
    return None, tables


def _split_untouched(tables: list[pa.Table], meta: StateMetaInfo) -> tuple[pa.Table, list[pa.Table]] | None:
    """(the rows of the leading plain files whose key no later file has, the other rows in
    order), when the leading files combine; ``None`` when that does not hold."""
    lead = 0
    while lead < len(tables) and "op" not in tables[lead].column_names:
        lead += 1
    if lead == 0 or lead == len(tables):
        return None
    head = combine_key_group(tables[:lead], meta)
    if head is None:
        return None
    tail = tables[lead:]
    try:
        later = pa.chunked_array([c for t in tail for c in t.column("key").chunks], head.column("key").type)
        touched = pc.is_in(head.column("key"), value_set=pc.unique(later))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    untouched = head.filter(pc.invert(touched))
    return untouched, [head.filter(touched).select(untouched.column_names), *tail]


def _concat(a: StateColumns, b: StateColumns) -> StateColumns:
    def both(x: list[Any] | None, y: list[Any] | None, n: int, m: int) -> list[Any] | None:
        if x is None and y is None:
            return None
        return (x if x is not None else [None] * n) + (y if y is not None else [None] * m)

    n, m = len(a), len(b)
    return StateColumns(a.keys + b.keys, both(a.namespaces, b.namespaces, n, m), a.values + b.values,
                        both(a.timestamps, b.timestamps, n, m))  # fmt: skip


def _apply_rows(
    tables: list[pa.Table], meta: StateMetaInfo, key_type: TypeInformation, allow_pickle: bool
) -> StateColumns:
    """The rows of ``tables`` applied one by one, in order."""
    from flinkstate.state.types.mapping import ListTypeInfo

    acc: dict[tuple[Any, Any], Any] = {}
    kind = meta.kind
    for table in tables:
        n = table.num_rows
        keys = canonical_values(from_arrow(table.column("key"), key_type, allow_pickle), key_type)
        namespaces: list[Any] = [None] * n
        if meta.namespace_type is not None and "namespace" in table.column_names:
            namespaces = from_arrow(table.column("namespace"), meta.namespace_type, allow_pickle)
            namespaces = canonical_values(namespaces, meta.namespace_type)
        ops = table.column("op").to_pylist() if "op" in table.column_names else [0] * n
        stamps = (
            table.column("ttl_timestamp").to_pylist() if "ttl_timestamp" in table.column_names else [None] * n
        )
        value_type = ListTypeInfo(meta.value_type) if kind is StateKind.LIST else meta.value_type
        values = from_arrow(table.column("value"), value_type, allow_pickle)
        user_keys: list[Any] = [None] * n
        if kind is StateKind.MAP:
            assert meta.user_key_type is not None
            user_keys = from_arrow(table.column("user_key"), meta.user_key_type, allow_pickle)
            user_keys = canonical_values(user_keys, meta.user_key_type)
        for i in range(n):
            scope = (keys[i], namespaces[i])
            delete = ops[i] == DELETE
            if kind is StateKind.LIST:
                if delete:
                    acc.pop(scope, None)
                elif values[i]:
                    elems, ts = acc.setdefault(scope, ([], []))
                    elems.extend(values[i])
                    ts.extend(stamps[i] if stamps[i] is not None else [None] * len(values[i]))
            elif kind is StateKind.MAP:
                entries = acc.get(scope)
                if delete and user_keys[i] is None:
                    acc.pop(scope, None)
                elif delete:
                    if entries is not None:
                        entries.pop(user_keys[i], None)
                        if not entries:
                            del acc[scope]
                else:
                    acc.setdefault(scope, {})[user_keys[i]] = (values[i], stamps[i])
            elif delete or values[i] is None:
                acc.pop(scope, None)
            else:
                acc[scope] = (values[i], stamps[i])
    return _columns_of(acc, meta)


def _stored(table: pa.Table, meta: StateMetaInfo) -> pa.Table:
    """``table`` without the rows that store nothing: a null value (it removes its scope, as
    when rows are applied one by one) or, for LIST, a null or empty list (nothing appended).
    The state engine writes no such rows; other writers (Spark) may."""
    if meta.kind is StateKind.MAP or table.num_rows == 0:
        return table
    value = table.column("value")
    keep = pc.is_valid(value)
    if meta.kind is StateKind.LIST and (pa.types.is_list(value.type) or pa.types.is_large_list(value.type)):
        keep = pc.and_kleene(keep, pc.greater(pc.list_value_length(value), 0))
    if pc.all(keep).as_py():  # ``keep`` holds no nulls
        return table
    return table.filter(keep)


def _columns_of(acc: dict[tuple[Any, Any], Any], meta: StateMetaInfo) -> StateColumns:
    keys = [scope[0] for scope in acc]
    namespaces = [scope[1] for scope in acc] if meta.namespace_type is not None else None
    ttl = meta.ttl is not None
    if meta.kind is StateKind.LIST:
        values = [elems for elems, _ in acc.values()]
        stamps = [ts for _, ts in acc.values()] if ttl else None
    elif meta.kind is StateKind.MAP:
        values = [{k: e[0] for k, e in entries.items()} for entries in acc.values()]
        stamps = [{k: e[1] for k, e in entries.items()} for entries in acc.values()] if ttl else None
    else:
        values = [v for v, _ in acc.values()]
        stamps = [t for _, t in acc.values()] if ttl else None
    return StateColumns(keys, namespaces, values, stamps)
