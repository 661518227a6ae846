"""Offline edits of a savepoint, what Flink's ``SavepointWriter`` edits: the one description
both formats apply (:mod:`.writing.edit` to ours, :mod:`.flink.writer.edit` to Flink's).

:class:`SavepointEdits` is a frozen value built step by step (each method returns a new
one): remove an operator, change an operator's uid, remove a state, add or replace a keyed
state from rows (:class:`KeyedRows`) of an operator or of a new one, change the max
parallelism. Every edit names operators by their uid in the source (a Flink operator also
by id or name); renames apply last. :func:`plan_edits` checks the edits against the
source's operators before anything is read or written (``[UNKNOWN_OPERATOR]``,
``[UNKNOWN_STATE]``, ``[UID_COLLISION]``, ``[EDIT_CONFLICT]``, ``[INVALID_PARALLELISM]``)
and lists what changes (the dry run).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from flinkstate.state.descriptors import StateKind
from flinkstate.state.errors import FlinkStateError
from flinkstate.state.keyed.snapshot import StateColumns, StateMetaInfo
from flinkstate.state.keygroups.assignment import (
    check_max_parallelism,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.ttl import StateTtlConfig
from flinkstate.state.types.mapping import TypeInformation, to_type_info

from .errors import EditError
from .state_rows import default_type, fit_keyed, key_group_columns


@dataclass(frozen=True, eq=False)
class KeyedRows:
    """A keyed state to add to an operator or to replace, from rows: columns ``key`` and
    ``value`` (a map state also ``user_key``), taken by the rule of
    :mod:`flinkstate.checkpoint.state_rows` (as the Spark writer takes a DataFrame's): a list
    state takes one row per element, in order; a value (reducing, aggregating) state keeps a
    key's last row, a map state a (key, user key)'s.

    Types not given are the replaced state's (the operator's key type), else the Arrow
    columns' (:func:`.state_rows.default_type`: ``int64`` -> LONG, ``string`` -> STRING, ...).
    Once planned, the types are complete and ``table`` holds the columns fitted to them.
    """

    uid: str
    name: str
    table: pa.Table
    kind: StateKind | None = None
    value_type: TypeInformation | None = None
    user_key_type: TypeInformation | None = None
    key_type: TypeInformation | None = None
    ttl: StateTtlConfig | None = None


def _table(rows: Any) -> pa.Table:
    """An Arrow table of a table, a pandas DataFrame or a list of dicts (pandas' NaN is the
    double value NaN, not a missing value: state stores it)."""
    if isinstance(rows, pa.Table):
        return rows
    if isinstance(rows, pa.RecordBatch):
        return pa.Table.from_batches([rows])
    try:
        if isinstance(rows, list):
            return pa.Table.from_pylist(rows)
        if type(rows).__module__.split(".")[0] == "pandas":  # NaN stays a double value, None is null
            return pa.table({str(c): pa.array(rows[c], from_pandas=False) for c in rows.columns})
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:  # e.g. an int of 2**63
        raise EditError(f"state rows do not make a table: {exc}", code="TYPE_MISMATCH") from exc
    raise EditError(
        f"state rows are a pyarrow Table, a pandas DataFrame or a list of dicts, not {type(rows).__name__}",
        code="INVALID_EDIT",
    )


@dataclass(frozen=True)
class SavepointEdits:
    """What to change; build with the methods (each returns a new value)."""

    removed_operators: tuple[str, ...] = ()
    added_operators: tuple[tuple[str, int, int], ...] = ()
    renamed_operators: tuple[tuple[str, str], ...] = ()
    removed_states: tuple[tuple[str, str], ...] = ()
    set_states: tuple[KeyedRows, ...] = ()
    max_parallelism: int | None = None

    def remove_operator(self, uid: str) -> SavepointEdits:
        return replace(self, removed_operators=(*self.removed_operators, uid))

    def add_operator(self, uid: str, parallelism: int = 1, max_parallelism: int = 128) -> SavepointEdits:
        """A new operator (Flink's ``withOperator`` of a new uid), to set keyed states on."""
        if not isinstance(uid, str) or not uid:
            raise EditError(f"a uid is a non-empty str, got {uid!r}", code="INVALID_EDIT")
        check_max_parallelism(max_parallelism)
        compute_key_group_range_for_operator_index(max_parallelism, parallelism, 0)  # checks the parallelism
        return replace(self, added_operators=(*self.added_operators, (uid, parallelism, max_parallelism)))

    def rename_operator(self, uid: str, new_uid: str) -> SavepointEdits:
        """Change an operator's uid (Flink's ``changeOperatorIdentifier``: its OperatorID is
        the new uid's hash)."""
        if not isinstance(new_uid, str) or not new_uid:
            raise EditError(f"a new uid is a non-empty str, got {new_uid!r}", code="INVALID_EDIT")
        return replace(self, renamed_operators=(*self.renamed_operators, (uid, new_uid)))

    def remove_state(self, uid: str, state: str) -> SavepointEdits:
        """Remove a keyed or operator state (every state of that name) of an operator."""
        return replace(self, removed_states=(*self.removed_states, (uid, state)))

    def set_keyed_state(
        self,
        uid: str,
        state: str,
        rows: Any,
        *,
        kind: StateKind | str | None = None,
        value_type: Any = None,
        user_key_type: Any = None,
        key_type: Any = None,
        ttl: StateTtlConfig | None = None,
    ) -> SavepointEdits:
        """Add or replace keyed state ``state`` of operator ``uid`` with ``rows`` (see
        :class:`KeyedRows`); types are a ``Types.X()`` or a ``pyarrow.DataType``."""
        try:
            state_kind = None if kind is None else StateKind(kind)
        except ValueError as exc:
            raise EditError(f"state {state!r}: unknown kind {kind!r}", code="INVALID_EDIT") from exc
        types = [None if t is None else to_type_info(t) for t in (value_type, user_key_type, key_type)]
        spec = KeyedRows(uid, state, _table(rows), state_kind, types[0], types[1], types[2], ttl)
        missing = {"key", "value"} - set(spec.table.column_names)
        if missing:
            raise EditError(
                f"state {state!r}: the rows have no column {sorted(missing)}", code="INVALID_EDIT"
            )
        return replace(self, set_states=(*self.set_states, spec))

    def with_max_parallelism(self, max_parallelism: int) -> SavepointEdits:
        """Every operator's max parallelism (each key placed in its key group anew)."""
        return replace(self, max_parallelism=check_max_parallelism(max_parallelism))

    def is_empty(self) -> bool:
        return self == SavepointEdits()


@dataclass(frozen=True)
class OperatorLayout:
    """What the plan needs of a source operator. ``name``: its uid (a Flink operator without
    one: its id, or the uid an edit names it by)."""

    name: str
    parallelism: int
    max_parallelism: int
    keyed_states: Mapping[str, StateMetaInfo]
    operator_states: frozenset[str]
    key_type: TypeInformation | None


@dataclass(frozen=True)
class Change:
    """One change, as the dry run prints it."""

    action: str
    operator: str
    state: str = ""
    before: str = ""
    after: str = ""


@dataclass(frozen=True)
class OperatorPlan:
    """One kept operator: its new uid, the states it loses and the states set."""

    source: OperatorLayout
    uid: str
    removed_keyed: frozenset[str] = frozenset()
    removed_operator: frozenset[str] = frozenset()
    set_states: tuple[KeyedRows, ...] = ()


@dataclass(frozen=True)
class EditPlan:
    operators: tuple[OperatorPlan, ...]
    max_parallelism: int | None
    changes: tuple[Change, ...] = field(default=())


def _resolve(layouts: list[OperatorLayout], ref: str) -> OperatorLayout:
    found = next((op for op in layouts if op.name == ref), None)
    if found is None:
        names = sorted(op.name for op in layouts)
        raise EditError(f"no operator {ref!r} to edit; operators: {names}", code="UNKNOWN_OPERATOR")
    return found


def _completed(rows: KeyedRows, op: OperatorLayout) -> KeyedRows:
    """``rows`` with every type and the kind decided (the replaced state's, else the columns'),
    its columns fitted to them (:func:`.state_rows.fit_keyed`: a value that does not fit, a
    null key, ... is refused here, before anything is read or written)."""
    old = op.keyed_states.get(rows.name)
    kind = rows.kind or (old.kind if old is not None else StateKind.VALUE)
    if old is not None and old.kind is not kind:
        raise EditError(
            f"operator {op.name!r}: state {rows.name!r} is a {old.kind.value} state, not {kind.value}",
            code="EDIT_CONFLICT",
        )
    column_type = rows.table.schema.field("value").type
    if kind is StateKind.LIST and (pa.types.is_list(column_type) or pa.types.is_large_list(column_type)):
        raise EditError(f"state {rows.name!r}: a list state takes one row per element", code="INVALID_EDIT")
    value_type = rows.value_type or (old.value_type if old is not None else default_type(column_type))
    user_key_type = rows.user_key_type or (old.user_key_type if old is not None else None)
    if kind is StateKind.MAP and user_key_type is None:
        if "user_key" not in rows.table.column_names:
            raise EditError(
                f"map state {rows.name!r}: the rows have no column 'user_key'", code="INVALID_EDIT"
            )
        user_key_type = default_type(rows.table.schema.field("user_key").type)
    key_type = rows.key_type or op.key_type or default_type(rows.table.schema.field("key").type)
    if op.key_type is not None and key_type != op.key_type:
        raise EditError(
            f"operator {op.name!r} has key type {op.key_type}; state {rows.name!r} declares {key_type}",
            code="KEY_TYPE_MISMATCH",
        )
    ttl = rows.ttl if rows.ttl is not None else (old.ttl if old is not None else None)
    ttl = ttl if ttl is not None and ttl.is_enabled() else None
    what = f"operator {op.name!r}, state {rows.name!r}"
    try:
        table = fit_keyed(rows.table, kind, key_type, value_type, user_key_type, what)
    except FlinkStateError as exc:
        raise EditError(exc.detail, code=exc.code) from exc
    return replace(
        rows, table=table, kind=kind, value_type=value_type, user_key_type=user_key_type,
        key_type=key_type, ttl=ttl,
    )  # fmt: skip


def _max_parallelism_change(op: OperatorLayout, max_p: int) -> list[Change]:
    if max_p < op.parallelism:
        raise EditError(f"max parallelism {max_p} is smaller than operator {op.name!r}'s parallelism "
                        f"{op.parallelism}", code="INVALID_PARALLELISM")  # fmt: skip
    if max_p == op.max_parallelism:
        return []
    return [Change("max parallelism", op.name, "", str(op.max_parallelism), str(max_p))]


def _added(layouts: list[OperatorLayout], edits: SavepointEdits) -> list[OperatorLayout]:
    """The layouts of the operators ``edits`` add (each needs a state set on it)."""
    out: list[OperatorLayout] = []
    for uid, p, max_p in edits.added_operators:
        if any(uid == op.name for op in (*layouts, *out)):
            raise EditError(f"operator {uid!r} is added but exists already", code="UID_COLLISION")
        if not any(r.uid == uid for r in edits.set_states):
            raise EditError(
                f"operator {uid!r} is added without state: set a state on it", code="INVALID_EDIT"
            )
        out.append(OperatorLayout(uid, p, max_p, {}, frozenset(), None))
    return out


def plan_edits(layouts: list[OperatorLayout], edits: SavepointEdits) -> EditPlan:
    """The edits checked against the source's operators, with the list of changes."""
    changes: list[Change] = []
    layouts = layouts + _added(layouts, edits)
    changes += [Change("add operator", uid, "", "", f"parallelism {p}, max parallelism {m}")
                for uid, p, m in edits.added_operators]  # fmt: skip
    removed = {_resolve(layouts, ref).name for ref in edits.removed_operators}
    changes += [Change("remove operator", name) for name in sorted(removed)]
    renames: dict[str, str] = {}
    for ref, new in edits.renamed_operators:
        op = _resolve(layouts, ref)
        if op.name in removed or op.name in renames:
            raise EditError(f"operator {op.name!r} is renamed twice or removed", code="EDIT_CONFLICT")
        renames[op.name] = new
    uids = [renames.get(op.name, op.name) for op in layouts if op.name not in removed]
    clashes = sorted({u for u in uids if uids.count(u) > 1})
    if clashes:
        raise EditError(
            f"after the renames, two operators would have uid {clashes[0]!r}", code="UID_COLLISION"
        )
    changes += [Change("rename operator", old, "", old, new) for old, new in renames.items()]
    drops: dict[str, set[tuple[bool, str]]] = {}
    for ref, state in edits.removed_states:
        op = _resolve(layouts, ref)
        hits = {(True, state)} if state in op.keyed_states else set()
        hits |= {(False, state)} if state in op.operator_states else set()
        if not hits:
            names = sorted({*op.keyed_states, *op.operator_states})
            raise EditError(
                f"operator {op.name!r} has no state {state!r}; it has {names}", code="UNKNOWN_STATE"
            )
        if op.name in removed:
            raise EditError(f"operator {op.name!r} is removed; remove it or its state", code="EDIT_CONFLICT")
        drops.setdefault(op.name, set()).update(hits)
        changes.append(Change("remove state", op.name, state))
    sets: dict[str, list[KeyedRows]] = {}
    for rows in edits.set_states:
        op = _resolve(layouts, rows.uid)
        if op.name in removed or (True, rows.name) in drops.get(op.name, ()):
            raise EditError(
                f"operator {op.name!r}: state {rows.name!r} is set and removed", code="EDIT_CONFLICT"
            )
        if any(r.name == rows.name for r in sets.get(op.name, ())):
            raise EditError(f"operator {op.name!r}: state {rows.name!r} is set twice", code="EDIT_CONFLICT")
        sets.setdefault(op.name, []).append(_completed(rows, op))
        verb = "replace state" if rows.name in op.keyed_states else "add state"
        changes.append(Change(verb, op.name, rows.name, "", f"{rows.table.num_rows} rows"))
    kept = [op for op in layouts if op.name not in removed]
    max_p = edits.max_parallelism
    if max_p is not None:
        for op in kept:
            changes += _max_parallelism_change(op, max_p)
    plans = tuple(
        OperatorPlan(
            op, renames.get(op.name, op.name),
            frozenset(n for keyed, n in drops.get(op.name, ()) if keyed),
            frozenset(n for keyed, n in drops.get(op.name, ()) if not keyed),
            tuple(sets.get(op.name, ())),
        )
        for op in kept
    )  # fmt: skip
    return EditPlan(plans, max_p, tuple(changes))


def rows_by_key_group(rows: KeyedRows, max_parallelism: int) -> dict[int, StateColumns]:
    """``rows`` (completed by :func:`plan_edits`) as each key group's entries
    (:func:`.state_rows.key_group_columns`); with TTL, every entry's last access is now."""
    kind, key_type, value_type = rows.kind, rows.key_type, rows.value_type
    assert kind is not None and key_type is not None and value_type is not None
    now = int(time.time() * 1000) if rows.ttl is not None else None
    columns = key_group_columns(
        rows.table, kind, key_type, value_type, rows.user_key_type, max_parallelism, now
    )
    return dict(columns)
