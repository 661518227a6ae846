"""Loading a Flink savepoint's state into our live backends (then checkpointed in our format).

Keyed states are restored per key group of the backend's range with the types their
serializer snapshots give; operator list, union and broadcast states are repartitioned
like ours. Flink does not store a state's TTL duration, so TTL states restore as plain
state (their last-access timestamps are in :meth:`FlinkSavepoint.keyed_state`). States
whose serializer cannot be decoded (Kryo, unknown) are refused with a typed error naming
them, unless left out with ``states``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from flinkstate.state.backend import AbstractKeyedStateBackend
from flinkstate.state.descriptors import StateKind
from flinkstate.state.heap.backend import HeapKeyedStateBackend
from flinkstate.state.keygroups import compute_key_group_range_for_operator_index
from flinkstate.state.operator import OperatorStateBackend, OperatorStateData, OperatorStateMode, repartition
from flinkstate.state.snapshot import StateColumns, StateMetaInfo

from ..errors import StateMigrationError
from .binary import UnsupportedSerializerError
from .body import KeyGroupDecoder, StateRows
from .header import StateInfo

if TYPE_CHECKING:
    from .savepoint import FlinkSavepoint

_MODES = {m.name: m for m in OperatorStateMode}


def _meta(info: StateInfo, where: str) -> StateMetaInfo:
    value = info.value.inner if info.value.inner is not None else info.value
    parts = [value, info.user_key] if info.user_key is not None else [value]
    if any(p.type_info is None or not p.decodable for p in parts):
        raise UnsupportedSerializerError(
            f"{where}: state {info.name} holds {value.describe()}, which cannot be restored; "
            "leave it out with states=[...]"
        )
    namespace = info.namespace
    return StateMetaInfo(
        info.name,
        StateKind(info.kind.lower()),
        value.type_info,  # type: ignore[arg-type]
        info.user_key.type_info if info.user_key is not None else None,
        None if namespace is None or namespace.void else namespace.type_info,
    )


def _columns(rows: StateRows, kg: int) -> StateColumns:
    """One key group's entries grouped per (key, namespace): values, lists or dicts."""
    kind = rows.info.kind
    scopes: dict[tuple[Any, Any], Any] = {}
    entries = zip(rows.key_group, rows.key, rows.namespace, rows.extra, rows.value, strict=True)
    for group, key, ns, extra, value in entries:
        if group != kg:
            continue
        scope = (key, ns)
        if kind == "LIST":
            scopes.setdefault(scope, []).append(value)
        elif kind == "MAP":
            scopes.setdefault(scope, {})[extra] = value
        else:
            scopes[scope] = value
    for group, keys, values in rows.chunks:
        if group == kg:
            for key, value in zip(keys.tolist(), values.to_pylist(), strict=True):
                scopes[(key, None)] = value
    namespaces = [ns for _, ns in scopes]
    void = all(ns is None for ns in namespaces)
    return StateColumns([k for k, _ in scopes], None if void else namespaces, list(scopes.values()))


def restore_keyed(
    sp: FlinkSavepoint, backend: AbstractKeyedStateBackend, operator: str, states: Iterable[str] | None = None
) -> None:
    """Load into ``backend`` every key group of its range of ``operator``'s keyed states."""
    op = sp.operator(operator)
    if op.max_parallelism != backend.max_parallelism:
        raise StateMigrationError(
            f"Flink operator {operator!r} has max parallelism {op.max_parallelism}; "
            f"the backend has {backend.max_parallelism}"
        )
    header = sp.keyed_header(operator)
    if header is None:
        return
    backend.restore_key_type(header.key.type_info)
    wanted = set(states) if states is not None else None
    infos = [s for s in header.states if not s.is_timer and (wanted is None or s.name in wanted)]
    metas = {s.name: _meta(s, sp.directory) for s in infos}
    groups = list(backend.key_group_range)
    for info in infos:
        rows = sp.decode_keyed(operator, info.name, groups)
        found = set(rows.key_group) | {g for g, _, _ in rows.chunks}
        for kg in sorted(found) or [backend.key_group_range.start]:
            backend.restore_state(metas[info.name], kg, _columns(rows, kg))


def keyed_backend(
    sp: FlinkSavepoint,
    operator: str,
    subtask: int,
    parallelism: int,
    backend_factory: Callable[..., AbstractKeyedStateBackend] = HeapKeyedStateBackend,
    states: Iterable[str] | None = None,
    **backend_args: Any,
) -> AbstractKeyedStateBackend:
    """A new backend for subtask ``subtask`` of ``parallelism``, restored from ``operator``
    (only ``states`` when given)."""
    op = sp.operator(operator)
    rng = compute_key_group_range_for_operator_index(op.max_parallelism, parallelism, subtask)
    backend = backend_factory(max_parallelism=op.max_parallelism, key_group_range=rng, **backend_args)
    restore_keyed(sp, backend, operator, states)
    return backend


def operator_backend(
    sp: FlinkSavepoint, operator: str, subtask: int, parallelism: int
) -> OperatorStateBackend:
    """Operator list, union and broadcast state of ``operator`` for subtask ``subtask`` of ``parallelism``."""
    op = sp.operator(operator)
    per_subtask: list[list[OperatorStateData]] = []
    for sub in op.subtasks:
        datas = []
        for info in sp.operator_infos(operator):
            value = sp.operator_values(operator, info.name, sub.index)
            if info.value.type_info is None or not info.value.decodable:
                raise UnsupportedSerializerError(
                    f"{sp.directory}: operator state {info.name} cannot be restored"
                )
            user_key = info.user_key.type_info if info.user_key is not None else None
            datas.append(
                OperatorStateData(info.name, _MODES[info.kind], info.value.type_info, value, user_key)
            )
        per_subtask.append(datas)
    return OperatorStateBackend(repartition(per_subtask, parallelism)[subtask])


__all__ = ["KeyGroupDecoder", "keyed_backend", "operator_backend", "restore_keyed"]
