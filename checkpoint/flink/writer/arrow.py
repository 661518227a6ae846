"""Writing Flink savepoints from Arrow columns (a DataFrame): an :class:`OperatorSource` for
:func:`.savepoint.write_operators`, the one writing path.

An :class:`ArrowState` is one state's rows: ``key`` (keyed and broadcast state), ``value``
and, for map state, ``user_key``, taken as :mod:`flinkstate.checkpoint.state_rows` takes
every writer's rows (a key's, map entry's, broadcast key's last row wins; a list state's rows
are its elements, in row order). Types are declared (:mod:`..types.declared_write`) or the columns'
own; every column is checked against them, and every type against what the writer can
write, when the :class:`ArrowOperator` is made, before anything is written.

:class:`MergedOperator` is the one way to add or replace states of an operator of a Flink
savepoint read: :func:`with_operator` (a write that appends: Flink's format cannot be
appended to in place, so the savepoint is written again) and the offline edits
(:mod:`.edit`) go through it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from flinkstate.state.descriptors import StateKind
from flinkstate.state.errors import InvalidArgumentError, StateTypeError
from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.operator import OperatorStateData, OperatorStateMode
from flinkstate.state.types.canonical import canonical_values, key_token
from flinkstate.state.types.mapping import TypeInformation

from ...arrow_codec import from_arrow
from ...state_rows import fit, fit_keyed, fit_keys, key_group_columns, refuse_null_elements
from ..errors import UnsupportedFlinkWriteError
from ..metadata.operator_id import operator_id
from ..metadata.versions import FlinkTarget
from ..reader.savepoint import FlinkSavepoint
from ..streams.header_write import KeyedStateSpec
from ..streams.operator_write import check_types
from ..types.snapshots_write import Snapshot, VerbatimSnapshot, key_snapshot
from .savepoint import flink_target, operators_of
from .sources import OperatorSource

KEYED_KINDS = tuple(k.name for k in StateKind)
OPERATOR_KINDS = {m.name: m for m in OperatorStateMode}


@dataclass(frozen=True)
class ArrowState:
    """One state's rows (see the module docstring); ``kind``: VALUE, LIST, MAP, REDUCING,
    AGGREGATING (keyed; the last two hold values or accumulators as a value state) or
    SPLIT_DISTRIBUTE, UNION, BROADCAST (operator state); ``user_key_type``: a map state's or
    broadcast state's key type; ``ttl``: keyed state with Flink's TTL serializer, each value's
    last-access timestamp the write time; ``spec``: how a state of the savepoint written to,
    carried as bytes, is set (:meth:`.OperatorSource.settable`: a declared Kryo state)."""

    name: str
    kind: str
    table: pa.Table
    value_type: TypeInformation
    user_key_type: TypeInformation | None = None
    ttl: bool = False
    spec: KeyedStateSpec | None = None

    @property
    def keyed(self) -> bool:
        return self.kind in KEYED_KINDS


def _fitted(state: ArrowState, key_type: TypeInformation | None, what: str) -> ArrowState:
    """``state`` with its columns cast to its types (``[TYPE_MISMATCH]`` where a value does not
    fit; nulls Flink cannot hold refused)."""
    table = state.table
    if state.keyed:
        assert key_type is not None
        kind = StateKind[state.kind]
        return replace(
            state, table=fit_keyed(table, kind, key_type, state.value_type, state.user_key_type, what)
        )
    cols = {"value": fit(table.column("value"), state.value_type, f"{what}, value")}
    if state.kind == "BROADCAST":
        assert state.user_key_type is not None
        cols["key"] = fit_keys(table.column("key"), state.user_key_type, f"{what}, key", "NULL_KEY")
    else:
        refuse_null_elements(cols["value"], what)
    return replace(state, table=pa.table(cols))


def _spec(state: ArrowState, what: str) -> KeyedStateSpec:
    """The spec ``state`` is written with (refused where Flink's serializers cannot hold it)."""
    if state.spec is None:
        spec = KeyedStateSpec(state.name, state.kind, state.value_type, state.user_key_type, state.ttl)
        spec.value_snapshot(what)
        return spec
    if (state.kind, state.ttl) != (state.spec.kind, state.spec.ttl):
        raise UnsupportedFlinkWriteError(
            f"{what}: its serializers are written as read ({state.spec.kind}, TTL {state.spec.ttl}); "
            f"it cannot be set as {state.kind}, TTL {state.ttl}"
        )
    return state.spec


class ArrowOperator(OperatorSource):
    """One operator written from :class:`ArrowState` s (see the module docstring)."""

    def __init__(
        self,
        uid: str,
        states: Sequence[ArrowState],
        key_type: TypeInformation | None,
        parallelism: int = 1,
        max_parallelism: int = 128,
    ) -> None:
        self.name, self.operator_id = uid, operator_id(uid)
        self.parallelism, self.max_parallelism = parallelism, max_parallelism
        keyed = [s for s in states if s.keyed]
        for s in states:
            if not s.keyed and s.kind not in OPERATOR_KINDS:
                raise UnsupportedFlinkWriteError(f"operator {uid!r}, state {s.name!r}: unknown kind {s.kind}")
        if keyed and key_type is None:
            raise InvalidArgumentError(f"operator {uid!r}: keyed state needs a key type", code="INVALID_KEY")
        self.key_type = key_type if keyed else None
        if self.key_type is not None:
            key_snapshot(self.key_type, f"operator {uid!r}: the key")
        self.arrow = [_fitted(s, key_type, f"operator {uid!r}, state {s.name!r}") for s in states]
        self.keyed_arrow = [s for s in self.arrow if s.keyed]
        self.states = tuple(_spec(s, f"operator {uid!r}, state {s.name!r}") for s in self.keyed_arrow)
        for s in self.arrow:
            if not s.keyed:
                what = f"operator {uid!r}, operator state {s.name!r}"
                check_types(what, s.value_type, s.user_key_type, s.kind == "BROADCAST")
        self.now = int(time.time() * 1000)

    def keyed_columns(self, index: int) -> Iterator[tuple[int, StateColumns]]:
        state, key_type = self.keyed_arrow[index], self.key_type
        assert key_type is not None
        now = self.now if state.ttl else None
        kind = StateKind[state.kind]
        return key_group_columns(
            state.table, kind, key_type, state.value_type, state.user_key_type, self.max_parallelism, now
        )

    def operator_states(self) -> list[list[OperatorStateData]]:
        """Every operator state as one source subtask's: the writer redistributes them."""
        out = []
        for s in self.arrow:
            if s.keyed:
                continue
            values = from_arrow(s.table.column("value"), s.value_type)
            mode = OPERATOR_KINDS[s.kind]
            if mode is OperatorStateMode.BROADCAST:
                assert s.user_key_type is not None
                keys = canonical_values(from_arrow(s.table.column("key"), s.user_key_type), s.user_key_type)
                last = {key_token(k): (k, v) for k, v in zip(keys, values, strict=True)}
                out.append(
                    OperatorStateData(s.name, mode, s.value_type, dict(last.values()), s.user_key_type)
                )
            else:
                out.append(OperatorStateData(s.name, mode, s.value_type, values))
        return [out]


class MergedOperator(OperatorSource):
    """An operator of a savepoint read (or as edited) with the states of ``added`` added or
    replacing its own: the one way to set states of an existing operator (:func:`with_operator`,
    the offline edits)."""

    def __init__(self, base: OperatorSource, added: ArrowOperator) -> None:
        self.base, self.added = base, added
        self.name, self.operator_id, self.flink = base.name, base.operator_id, base.flink
        self.parallelism, self.max_parallelism = base.parallelism, base.max_parallelism
        if (base.parallelism, base.max_parallelism) != (added.parallelism, added.max_parallelism):
            raise InvalidArgumentError(
                f"operator {base.name!r} exists with parallelism {base.parallelism} and max parallelism "
                f"{base.max_parallelism}; write with the same, or overwrite the savepoint",
                code="INVALID_PARALLELISM",
            )
        keyed = base.key_type is not None and added.key_type is not None
        if keyed and base.key_type != added.key_type:
            raise StateTypeError(
                f"operator {base.name!r} has key type {base.key_type}, this write {added.key_type}",
                code="KEY_TYPE_MISMATCH",
            )
        self.names = {s.name for s in added.arrow}
        self.kept = [i for i, s in enumerate(base.states) if s.name not in self.names]
        self.key_type = base.key_type if base.key_type is not None else added.key_type
        if not self.kept and not added.states:
            self.key_type = None
        self.states = tuple(base.states[i] for i in self.kept) + added.states

    @property
    def flink_key_groups(self) -> bool:
        """The base's keys sit where its rule puts them; added rows are placed by ours."""
        return self.base.flink_key_groups and (self.added.flink_key_groups or not self.added.states)

    def key_group(self, key: Any, max_parallelism: int) -> int:
        if self.base.key_type is None:  # keys of the added states only
            return super().key_group(key, max_parallelism)
        return self.base.key_group(key, max_parallelism)

    def check_key_groups(self) -> None:
        if self.base.key_type is None:
            super().check_key_groups()
        else:
            self.base.check_key_groups()

    def key_serializer_snapshot(self) -> Snapshot | VerbatimSnapshot:
        if self.base.key_type is None:
            return super().key_serializer_snapshot()
        return self.base.key_serializer_snapshot()

    def verbatim_key(self, spec: KeyedStateSpec, key: bytes) -> Any:
        return self.base.verbatim_key(spec, key)  # only the base's states are carried as bytes

    def settable(self, name: str) -> KeyedStateSpec | None:
        return self.base.settable(name)

    def keyed_columns(self, index: int) -> Iterator[tuple[int, StateColumns]]:
        if index < len(self.kept):
            return self.base.keyed_columns(self.kept[index])
        return self.added.keyed_columns(index - len(self.kept))

    def operator_states(self) -> list[list[OperatorStateData]]:
        out = [[d for d in sub if d.name not in self.names] for sub in self.base.operator_states()]
        out += [[] for _ in range(self.parallelism - len(out))]
        out[0] += self.added.operator_states()[0]
        return out


def with_operator(
    savepoint: FlinkSavepoint | None, added: ArrowOperator, flink: FlinkTarget | None = None
) -> list[OperatorSource]:
    """The operators of ``savepoint`` (none when None) with ``added``: its states added to the
    operator of the same uid (replacing states of the same names), or a new operator; for release
    ``flink`` (default: :func:`.savepoint.flink_target`'s for ``savepoint``)."""
    target = flink or flink_target(None, savepoint)
    ops = operators_of(savepoint, None, target) if savepoint is not None else []
    out: list[OperatorSource] = []
    for op in ops:
        out.append(MergedOperator(op, added) if op.operator_id == added.operator_id else op)
    if not any(op.operator_id == added.operator_id for op in ops):
        out.append(added)
    return out
