"""What writing a Flink savepoint read for a chosen release would do with each state: a dry run's
plan (``flinkstate convert --to flink --dry-run``), every state checked, none written.

Each state is ``written`` (decoded and written with the serializers it had), ``re-encoded``
(values of Kryo 2 re-encoded as Kryo 5's, or a POJO's List fields as Flink 2.x's:
:mod:`.migrate`), ``carried`` (its bytes as read) or ``refused`` (why, and the declaration
that would make it convertible). An operator refused as a whole has one row, state ``*``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import UnsupportedFlinkWriteError
from ..reader.savepoint import FlinkSavepoint
from .flink_source import FlinkOperator
from .pyflink import pyflink_operator
from .savepoint import flink_target

WRITTEN, REENCODED, CARRIED, REFUSED = "written", "re-encoded", "carried", "refused"


@dataclass(frozen=True)
class StatePlan:
    """One state's fate: ``operator`` (uid, else id), ``state``, ``kind`` (keyed VALUE, LIST, ...,
    ``TIMERS``; ``OPERATOR`` and its mode), ``action`` and why (``detail``, for a refusal)."""

    operator: str
    state: str
    kind: str
    action: str
    detail: str = ""


def convert_plan(
    source: FlinkSavepoint, flink_version: str | None = None, refs: Iterable[str] | None = None
) -> list[StatePlan]:
    """The plan of ``write_savepoint(source, ..., flink_version=, operators=refs)``."""
    flink = flink_target(flink_version, source)
    metas = [source.operator(r) for r in refs] if refs is not None else list(source.operators)
    out: list[StatePlan] = []
    for meta in (m for m in metas if m.subtasks):
        name = meta.uid or meta.operator_id
        if pyflink_operator(source, meta, None, flink) is not None:
            out.append(StatePlan(name, "*", "PYFLINK", WRITTEN))
            continue
        refused: dict[str, str] = {}
        try:
            op = FlinkOperator(source, meta, flink, refused)
        except UnsupportedFlinkWriteError as exc:
            out.append(StatePlan(name, "*", "", REFUSED, str(exc)))
            continue
        for spec in op.states:
            action = CARRIED if spec.carried else REENCODED if spec.encoder is not None else WRITTEN
            out.append(StatePlan(name, spec.name, "TIMERS" if spec.is_timer else spec.kind, action))
        for info in op.infos.values():
            action = CARRIED if info.name in op.verbatim else WRITTEN
            out.append(StatePlan(name, info.name, f"OPERATOR {info.kind}", action))
        keyed = {i.name: i for i in op.header.states} if op.header is not None else {}
        for state, why in refused.items():
            found = keyed.get(state)
            kind = ("TIMERS" if found.is_timer else found.kind) if found is not None else "OPERATOR"
            out.append(StatePlan(name, state, kind, REFUSED, why))
    return out
