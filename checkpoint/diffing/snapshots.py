"""One state's changes between two snapshots, as change rows and counts (the ``diff`` command's
unit; the Spark reader streams the same rows, a keyed state's partition by partition)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from .plan import DiffSettings, KeyedDiff, operator_diff, plan_keyed_diff, state_pairs
from .rows import change_rows, change_schema
from .scopes import ScopeDiff
from .sides import Side


@dataclass(frozen=True)
class StateDiff:
    """A state's diff, planned: a keyed state's units (``keyed``), or operator state's
    difference, computed at once (``operator``: its elements are few, read whole)."""

    schema: pa.Schema
    """The change rows' schema."""
    checkpoint_id: int | None
    """The new side's checkpoint id (the change rows' ``checkpoint_id``)."""
    keyed: KeyedDiff | None = None
    operator: ScopeDiff | None = None

    def diffs(self) -> Iterator[ScopeDiff]:
        if self.keyed is not None:
            yield from self.keyed.changes()
        elif self.operator is not None and not self.operator.empty:
            yield self.operator


def plan_state_diff(old: Side, new: Side, operator: str, state: str, settings: DiffSettings) -> StateDiff:
    """The diff of one state; a state keyed on one side and operator state on the other, or
    rows that do not compare, are refused with ``[DIFF_INCOMPARABLE]``."""
    state_pairs(old, new, operator, state)
    keyed = plan_keyed_diff(old, new, operator, state, settings)
    if keyed is not None:
        return StateDiff(change_schema(keyed.schema), new.checkpoint_id, keyed=keyed)
    diff, view = operator_diff(old, new, operator, state, settings)
    return StateDiff(change_schema(view), new.checkpoint_id, operator=diff)


@dataclass
class StateChanges:
    """A state's changes: how many scopes (or list elements) were ``added``, ``removed``,
    ``changed``; ``skipped``: key groups left unread (the same files on both sides); ``rows``:
    the first change rows (up to the limit asked)."""

    operator: str
    state: str
    added: int = 0
    removed: int = 0
    changed: int = 0
    skipped: int = 0
    rows: list[pa.Table] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not (self.added or self.removed or self.changed)


def diff_state(
    old: Side, new: Side, operator: str, state: str, settings: DiffSettings, limit: int | None = None
) -> StateChanges:
    """Every change of ``state`` counted, its first ``limit`` change rows kept (``None``: all)."""
    plan = plan_state_diff(old, new, operator, state, settings)
    out = StateChanges(operator, state, skipped=0 if plan.keyed is None else plan.keyed.skipped)
    kept = 0
    for diff in plan.diffs():
        out.added += diff.added
        out.removed += diff.removed
        out.changed += diff.changed
        if limit is not None and kept >= limit:
            continue
        rows = change_rows(diff.deletes, diff.upserts, plan.schema, plan.checkpoint_id)
        if rows is not None:
            rows = rows if limit is None else rows.slice(0, limit - kept)
            out.rows.append(rows)
            kept += rows.num_rows
    return out
