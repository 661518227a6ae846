"""Operator state as a job restored at the written parallelism sees it: what the writer's
tests compare our reader's and Flink's findings with (Flink's redistribution rule applied to
the model of ``write_model.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from write_model import OperatorModel, OperatorStateModel, _type, canonical, model

from flinkstate.state.operator import OperatorStateData, OperatorStateMode, repartition

if TYPE_CHECKING:
    from flinkstate.checkpoint.flink import FlinkSavepoint


def as_data(name: str, s: OperatorStateModel, elements: Any) -> OperatorStateData:
    key = _type(s.user_key_type) if s.mode == "BROADCAST" else None
    return OperatorStateData(name, OperatorStateMode[s.mode], _type(s.value_type), elements, key)


def _view(s: OperatorStateModel, elements: Any) -> Any:
    if s.mode == "BROADCAST":
        return {canonical(k, s.user_key_type): canonical(v, s.value_type) for k, v in elements.items()}
    values = [canonical(v, s.value_type) for v in elements]
    return sorted(values) if s.mode == "UNION" else values


def restored_view(
    uid: str, per_subtask: list[list[OperatorStateData]], models: dict[str, OperatorModel] | None = None
) -> dict[tuple[str, int, str], Any]:
    """What each subtask of a job restored at the written parallelism sees of the operator
    states written ``per_subtask`` (Flink's rule: list state kept, union state the union of
    all, broadcast state kept), canonical: a list, a sorted list (union) or a dict; empty
    states left out."""
    op = (models or model())[uid]
    out: dict[tuple[str, int, str], Any] = {}
    for i, states in enumerate(repartition(per_subtask, len(per_subtask))):
        for d in states:
            if d.elements:
                out[(uid, i, d.name)] = _view(op.operator_states[d.name], d.elements)
    return out


def expected_operator_states(
    parallelism: dict[str, int], models: dict[str, OperatorModel] | None = None
) -> dict[tuple[str, int, str], Any]:
    """The restored view of the model's operator states written at ``parallelism``: list
    state redistributed by Flink's rule, every subtask with the union of all union parts and a
    copy of a broadcast map."""
    out: dict[tuple[str, int, str], Any] = {}
    for uid, op in (models or model()).items():
        p = parallelism[uid]
        splits = {n: s for n, s in op.operator_states.items() if s.mode == "SPLIT_DISTRIBUTE"}
        source_parallelism = max((len(s.parts) for s in op.operator_states.values()), default=0)
        old = [[as_data(n, s, s.parts[i]) for n, s in splits.items()] for i in range(source_parallelism)]
        for i, states in enumerate(repartition(old, p)):
            for d in states:
                if d.elements:
                    out[(uid, i, d.name)] = _view(splits[d.name], d.elements)
            for n, s in op.operator_states.items():
                if s.mode == "UNION":
                    out[(uid, i, n)] = _view(s, [e for part in s.parts for e in part])
                elif s.mode == "BROADCAST":
                    out[(uid, i, n)] = _view(s, s.parts[i % len(s.parts)])
    return out


def operator_view(sp: FlinkSavepoint) -> dict[tuple[str, int, str], Any]:
    """The operator states in ``sp`` as a job restored at the written parallelism sees them."""
    out = {}
    for uid, op in model().items():
        if not op.operator_states:
            continue
        parallelism = sp.operator(uid).parallelism
        per: list[list[Any]] = [[] for _ in range(parallelism)]
        for name, s in op.operator_states.items():
            found = sp.operator_state(uid, name).to_pylist()
            for i in range(parallelism):
                mine = [r for r in found if r["subtask"] == i]
                if s.mode == "BROADCAST":
                    elements: Any = {r["key"]: r["value"] for r in mine}
                else:
                    elements = [r["value"] for r in sorted(mine, key=lambda r: r["position"])]
                per[i].append(as_data(name, s, elements))
        out.update(restored_view(uid, per))
    return out
