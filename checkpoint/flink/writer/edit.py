"""Offline edits of a Flink savepoint, written as a new canonical savepoint Flink restores.

The edits (:class:`~flinkstate.checkpoint.edits.SavepointEdits`) wrap the savepoint
writer's sources (:class:`.flink_source.FlinkOperator`): a removed operator is not
written, a renamed one is written under the new uid's OperatorID (what Flink's
``changeOperatorIdentifier`` does), a removed state is left out of its operator's streams,
a state set from rows is added or replaced as the Spark writer's append does
(:class:`.arrow.MergedOperator` of an :class:`.arrow.ArrowOperator`; an added
operator is an :class:`.arrow.ArrowOperator`), and a new max parallelism places every
key in its new key group. Everything goes through
:func:`.savepoint.write_operators`: all is encoded before any file is written, and
``_metadata`` is written last. The edited savepoint is written for the release
``flink_version`` names; by default, for a Flink 1.x savepoint, for the oldest release it can be
from (every release of its range restores it: :func:`.savepoint.flink_target`), else the newest.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from flinkstate.state.descriptors import StateKind
from flinkstate.state.keyed.snapshot import StateColumns, StateMetaInfo
from flinkstate.state.operator import OperatorStateData
from flinkstate.state.ttl import StateTtlConfig

from ...edits import EditPlan, KeyedRows, OperatorLayout, OperatorPlan, SavepointEdits, plan_edits
from ...errors import CheckpointError
from ..errors import UnsupportedFlinkWriteError
from ..metadata.operator_id import operator_id, operator_id_hex
from ..metadata.versions import FlinkTarget
from ..reader.savepoint import FlinkSavepoint
from ..streams.header_write import KeyedStateSpec
from ..types.snapshots_write import Snapshot, VerbatimSnapshot
from .arrow import ArrowOperator, ArrowState, MergedOperator
from .flink_source import FlinkOperator
from .savepoint import DEFAULT_INLINE_THRESHOLD, flink_target, write_operators
from .sources import OperatorSource

FLINK_TTL = StateTtlConfig.new_builder(timedelta(days=1)).build()
"""What marks a Flink state as a TTL state in an edit plan: Flink's TTL serializer records no
duration (Flink applies the restoring job's), so only being enabled matters."""


class EditedOperator(OperatorSource):
    """A Flink operator renamed as planned, without the states the plan removes."""

    def __init__(self, inner: OperatorSource, plan: OperatorPlan) -> None:
        self.inner, self.plan = inner, plan
        self.name, self.flink = plan.uid, inner.flink
        renamed = plan.uid != plan.source.name
        self.operator_id = operator_id(plan.uid) if renamed else inner.operator_id
        self.parallelism, self.max_parallelism = inner.parallelism, inner.max_parallelism
        carried = {s.name for s in inner.states if s.verbatim is not None}
        for rows in plan.set_states:
            if rows.name in carried and inner.settable(rows.name) is None:
                raise UnsupportedFlinkWriteError(
                    f"operator {self.name!r}, state {rows.name!r}: its serializer cannot be written, so it "
                    "can be kept (carried as it is) or removed, not set"
                )
        self._kept = [i for i, s in enumerate(inner.states) if s.name not in plan.removed_keyed]
        self.states = tuple(inner.states[i] for i in self._kept)
        self.key_type = inner.key_type if self.states else None

    @property
    def flink_key_groups(self) -> bool:
        return self.inner.flink_key_groups if self.inner.key_type is not None else super().flink_key_groups

    def check_key_groups(self) -> None:
        if self.inner.key_type is not None:
            self.inner.check_key_groups()
        else:
            super().check_key_groups()

    def key_group(self, key: Any, max_parallelism: int) -> int:
        return (
            self.inner.key_group(key, max_parallelism)
            if self.inner.key_type is not None
            else super().key_group(key, max_parallelism)
        )

    def key_serializer_snapshot(self) -> Snapshot | VerbatimSnapshot:
        return (
            self.inner.key_serializer_snapshot()
            if self.inner.key_type is not None
            else super().key_serializer_snapshot()
        )

    def verbatim_key(self, spec: KeyedStateSpec, key: bytes) -> Any:
        return self.inner.verbatim_key(spec, key)

    def settable(self, name: str) -> KeyedStateSpec | None:
        return self.inner.settable(name)

    def keyed_columns(self, index: int) -> Iterator[tuple[int, StateColumns]]:
        return self.inner.keyed_columns(self._kept[index])

    def operator_states(self) -> list[list[OperatorStateData]]:
        gone = self.plan.removed_operator
        return [[d for d in sub if d.name not in gone] for sub in self.inner.operator_states()]


def _arrow_state(rows: KeyedRows, spec: KeyedStateSpec | None) -> ArrowState:
    """A state the plan sets (types completed, columns fitted), as the Arrow writer's
    (``spec``: how a state carried as bytes is set, :meth:`.OperatorSource.settable`)."""
    assert rows.kind is not None and rows.value_type is not None
    return ArrowState(
        rows.name, rows.kind.name, rows.table, rows.value_type, rows.user_key_type, rows.ttl is not None, spec
    )


def _edited_operator(inner: OperatorSource | None, plan: OperatorPlan) -> OperatorSource:
    """The operator ``plan`` edits (``inner``; None: one the plan adds), as edited."""
    layout = plan.source
    source = inner or ArrowOperator(layout.name, [], None, layout.parallelism, layout.max_parallelism)
    edited = EditedOperator(source, plan)
    if not plan.set_states:
        return edited
    key_type = source.key_type or plan.set_states[0].key_type
    carried = {s.name for s in source.states if s.verbatim is not None}  # re-encoded ones too
    states = [
        _arrow_state(r, source.settable(r.name) if r.name in carried else None) for r in plan.set_states
    ]
    return MergedOperator(
        edited, ArrowOperator(plan.uid, states, key_type, source.parallelism, source.max_parallelism)
    )


def _layout(op: FlinkOperator, name: str) -> OperatorLayout:
    """``op``'s states as a plan sees them: a timer queue as our checkpoints hold one (a map of
    LONG timestamps, :func:`.sources.is_timer_queue`)."""
    keyed = {
        s.name: StateMetaInfo(
            s.name,
            StateKind.MAP if s.is_timer else StateKind[s.kind],
            s.value,
            s.value if s.is_timer else s.user_key,
            None,
            FLINK_TTL if s.ttl else None,
        )
        for s in op.states
    }
    return OperatorLayout(name, op.parallelism, op.max_parallelism, keyed, frozenset(op.infos), op.key_type)


def _refs(edits: SavepointEdits) -> list[str]:
    """Every uid the edits name, rename targets included (one that hashes to another
    operator's id is that operator's uid: the rename collides)."""
    return [*edits.removed_operators, *(u for pair in edits.renamed_operators for u in pair),
            *(uid for uid, _, _ in edits.added_operators),
            *(r for r, _ in edits.removed_states), *(r.uid for r in edits.set_states)]  # fmt: skip


def _names(source: FlinkSavepoint, edits: SavepointEdits) -> dict[str, str]:
    """Each operator's name in the plan, by id: its uid; for one whose metadata records only
    the uid's hash, the uid an edit names it by (else its id)."""
    names = {op.operator_id: op.uid or op.operator_id for op in source.operators}
    for ref in _refs(edits):
        if operator_id_hex(ref) in names and names[operator_id_hex(ref)] == operator_id_hex(ref):
            names[operator_id_hex(ref)] = ref
    return names


def _resolved(source: FlinkSavepoint, edits: SavepointEdits, names: Mapping[str, str]) -> SavepointEdits:
    """``edits`` naming operators as the plan does (any ref the reader resolves: uid, id, name)."""

    def name(ref: str) -> str:
        try:
            return names[source.operator(ref).operator_id]
        except CheckpointError:
            return ref  # the plan names it unknown

    return replace(
        edits,
        removed_operators=tuple(name(r) for r in edits.removed_operators),
        renamed_operators=tuple((name(r), new) for r, new in edits.renamed_operators),
        removed_states=tuple((name(r), s) for r, s in edits.removed_states),
        set_states=tuple(replace(r, uid=name(r.uid)) for r in edits.set_states),
    )


def _planned(
    source: FlinkSavepoint, edits: SavepointEdits, flink: FlinkTarget
) -> tuple[dict[str, OperatorSource], EditPlan]:
    """The source's operators by plan name (for release ``flink``), and the plan."""
    names = _names(source, edits)
    resolved = _resolved(source, edits, names)
    removed = set(resolved.removed_operators)
    operators: dict[str, OperatorSource] = {}
    layouts = []
    for meta in source.operators:
        name = names[meta.operator_id]
        if name in removed:  # never read: an operator the writer could not write can go
            layouts.append(
                OperatorLayout(name, meta.parallelism, meta.max_parallelism, {}, frozenset(), None)
            )
            continue
        op = operators[name] = FlinkOperator(source, meta, flink)
        layouts.append(_layout(op, name))
    return operators, plan_edits(layouts, resolved)


def _holds_state(plan: OperatorPlan) -> bool:
    """Whether the edited operator holds any state (one without is not written, as
    :func:`.savepoint.write_savepoint` writes none)."""
    keyed = set(plan.source.keyed_states) - plan.removed_keyed
    return bool(keyed or plan.set_states or plan.source.operator_states - plan.removed_operator)


def _edited(
    source: FlinkSavepoint, edits: SavepointEdits, flink: FlinkTarget
) -> tuple[EditPlan, list[OperatorSource]]:
    """The plan, and the operators to write as edited (each checked writable for ``flink``; none read)."""
    operators, plan = _planned(source, edits, flink)
    edited = [_edited_operator(operators.get(p.source.name), p) for p in plan.operators if _holds_state(p)]
    return plan, edited


def plan_savepoint_edits(
    source: FlinkSavepoint, edits: SavepointEdits, flink_version: str | None = None
) -> EditPlan:
    """``edits`` checked against ``source`` for release ``flink_version`` (see
    :func:`edit_savepoint`; no state read, nothing written): what would change."""
    return _edited(source, edits, flink_target(flink_version, source))[0]


def edit_savepoint(
    source: FlinkSavepoint,
    target: str,
    edits: SavepointEdits,
    *,
    storage: Mapping[str, Any] | None = None,
    inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
    flink_version: str | None = None,
) -> FlinkSavepoint:
    """Write the Flink savepoint ``source`` (``read_savepoint(...)``) with ``edits`` applied as a
    new canonical savepoint in the directory ``target`` and return it, read back. The source
    is not changed; what cannot be written is refused before any file is written.
    ``flink_version``: the release to write for (default: for a Flink 1.x savepoint the oldest
    release it can be from, else the newest: :func:`.savepoint.flink_target`)."""
    if not isinstance(source, FlinkSavepoint):
        raise CheckpointError(
            f"edit_savepoint edits Flink savepoints (ours: edit_checkpoint), not {type(source).__name__}",
            code="UNSUPPORTED_FORMAT",
        )
    flink = flink_target(flink_version, source)
    plan, edited = _edited(source, edits, flink)
    return write_operators(edited, target, source.meta.checkpoint_id, flink=flink,
                           max_parallelism=plan.max_parallelism, storage=storage,
                           inline_threshold=inline_threshold)  # fmt: skip
