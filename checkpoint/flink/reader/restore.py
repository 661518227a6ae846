"""Loading a Flink savepoint's state into our live backends (then checkpointed in our format).

Keyed states are restored per key group of the backend's range with the types their
serializer snapshots give; keys whose Java ``hashCode()`` we do not compute (Tuple, Row,
POJO...) go to the key group our hash gives them, not Flink's. Timers are restored as the
map states our timer service keeps (:mod:`.timers`). Operator list, union and
broadcast states are repartitioned like ours. Flink does not store a state's TTL duration,
so TTL states restore as plain state (their last-access timestamps are in
:meth:`.savepoint.FlinkSavepoint.keyed_state`). States whose serializer cannot be decoded (Kryo,
unknown) are refused with a typed error naming them, unless left out with ``states``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

import pyarrow as pa

from flinkstate.state.descriptors import StateKind
from flinkstate.state.heap.backend import HeapKeyedStateBackend
from flinkstate.state.keyed.backend import AbstractKeyedStateBackend
from flinkstate.state.keyed.snapshot import StateColumns, StateMetaInfo
from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index
from flinkstate.state.keygroups.hashing import java_hashed, key_group_assigner
from flinkstate.state.operator import OperatorStateBackend, OperatorStateData, OperatorStateMode, repartition
from flinkstate.state.types.canonical import canonicalizer
from flinkstate.state.types.mapping import TypeInformation

from ...errors import StateMigrationError
from ..errors import UnsupportedSerializerError
from ..metadata.metadata_read import OperatorMeta
from ..streams.header_read import KeyedHeader, StateInfo
from ..streams.keyed_read import KeyGroupDecoder, StateRows
from .timers import timer_entries, timer_meta


class Savepoint(Protocol):
    """What a restore reads of a savepoint (:class:`.savepoint.FlinkSavepoint`)."""

    directory: str

    def operator(self, ref: str) -> OperatorMeta: ...

    def keyed_header(self, operator: str) -> KeyedHeader | None: ...

    def decode_keyed(
        self, operator: str, state: str, key_groups: Iterable[int] | None = None
    ) -> StateRows: ...

    def decode_timers(
        self, operator: str, queue: str, key_groups: Iterable[int] | None = None
    ) -> list[StateRows]: ...

    def operator_infos(self, operator: str) -> list[StateInfo]: ...

    def operator_state(self, operator: str, state: str) -> pa.Table: ...


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


def _as_is(value: Any) -> Any:
    return value


def _grouped(
    rows: StateRows,
    route: Callable[[int, Any], int | None],
    key_type: TypeInformation | None,
    user_key_type: TypeInformation | None,
) -> dict[int, StateColumns]:
    """Entries per key group ``route(stored group, key)`` gives (None: not restored here),
    grouped per (key, namespace): values, lists or dicts; keys and user keys in canonical
    form (:mod:`flinkstate.state.types.canonical`: one NaN, ``-0.0`` apart from ``0.0``)."""
    key_canon = canonicalizer(key_type) or _as_is
    user_key_canon = canonicalizer(user_key_type) or _as_is
    kind = rows.info.kind
    groups: dict[int, dict[tuple[Any, Any], Any]] = {}
    entries = zip(rows.key_group, rows.key, rows.namespace, rows.extra, rows.value, strict=True)
    for group, key, ns, extra, value in entries:
        kg = route(group, key)
        if kg is None:
            continue
        scopes = groups.setdefault(kg, {})
        scope = (key if key is None else key_canon(key), ns)
        if kind == "LIST":
            scopes.setdefault(scope, []).append(value)
        elif kind == "MAP":
            scopes.setdefault(scope, {})[extra if extra is None else user_key_canon(extra)] = value
        else:
            scopes[scope] = value
    for group, keys, values in rows.chunks:
        for key, value in zip(keys.to_pylist(), values.to_pylist(), strict=True):
            kg = route(group, key)
            if kg is not None:
                groups.setdefault(kg, {})[(key_canon(key), None)] = value
    return {kg: _columns(scopes) for kg, scopes in groups.items()}


def _columns(scopes: dict[tuple[Any, Any], Any]) -> StateColumns:
    namespaces = [ns for _, ns in scopes]
    void = all(ns is None for ns in namespaces)
    return StateColumns([k for k, _ in scopes], None if void else namespaces, list(scopes.values()))


def _flink_groups(key_type: TypeInformation | None) -> bool:
    """Whether Flink's key group of a key is ours (an undecodable key type is refused later)."""
    return key_type is None or java_hashed(key_type)


def _router(
    key_type: TypeInformation | None, backend: AbstractKeyedStateBackend
) -> Callable[[int, Any], int | None]:
    """Where an entry goes in ``backend``: its stored (Flink's) key group when our hash is Java's
    ``hashCode()``; else the group our hash gives its key, which is what lookups compute."""
    rng = backend.key_group_range
    if key_type is None or java_hashed(key_type):
        return lambda group, _key: group if group in rng else None
    assign, max_parallelism = key_group_assigner(key_type), backend.max_parallelism

    def ours(_group: int, key: Any) -> int | None:
        kg = assign(key, max_parallelism)
        return kg if kg in rng else None

    return ours


def restore_keyed(
    sp: Savepoint, backend: AbstractKeyedStateBackend, operator: str, states: Iterable[str] | None = None
) -> None:
    """Load into ``backend`` every entry of ``operator``'s keyed states in its key-group range.

    Tuple, Row, POJO and other keys whose Java ``hashCode()`` we do not compute sit in other
    key groups in Flink than in our backends: every key group is read and each entry goes
    to the group our hash gives it (correct, but each subtask decodes the whole state).
    """
    op = sp.operator(operator)
    if op.max_parallelism != backend.max_parallelism:
        raise StateMigrationError(
            f"Flink operator {operator!r} has max parallelism {op.max_parallelism}; "
            f"the backend has {backend.max_parallelism}"
        )
    header = sp.keyed_header(operator)
    if header is None:
        return
    key_type = header.key.type_info
    backend.restore_key_type(key_type)
    wanted = set(states) if states is not None else None
    infos = [s for s in header.states if wanted is None or s.name in wanted]
    what = f"{sp.directory}: operator {operator!r}"
    metas = {s.name: timer_meta(s, what) if s.is_timer else _meta(s, sp.directory) for s in infos}
    route = _router(key_type, backend)
    groups = list(backend.key_group_range) if _flink_groups(key_type) else None
    for info in infos:
        if info.is_timer:
            rows = timer_entries(info, sp.decode_timers(operator, info.name, groups))
        else:
            rows = sp.decode_keyed(operator, info.name, groups)
        grouped = _grouped(rows, route, key_type, metas[info.name].user_key_type)
        for kg in sorted(grouped) or [backend.key_group_range.start]:
            backend.restore_state(metas[info.name], kg, grouped.get(kg, StateColumns([], None, [])))


def keyed_backend(
    sp: Savepoint,
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


def operator_backend(sp: Savepoint, operator: str, subtask: int, parallelism: int) -> OperatorStateBackend:
    """Operator list, union and broadcast state of ``operator`` for subtask ``subtask`` of ``parallelism``.

    Repartitioned over the operator's parallelism by subtask index, as Flink does: a subtask
    without a state (finished, or never registered it) holds none of it.
    """
    return OperatorStateBackend(repartition(operator_states(sp, operator), parallelism)[subtask])


def operator_states(sp: Savepoint, operator: str) -> list[list[OperatorStateData]]:
    """Each subtask's operator states of ``operator`` as written (what :func:`repartition` takes)."""
    op = sp.operator(operator)
    per_subtask: list[list[OperatorStateData]] = [[] for _ in range(op.parallelism)]
    for info in sp.operator_infos(operator):
        if info.value.type_info is None or not info.value.decodable:
            raise UnsupportedSerializerError(f"{sp.directory}: operator state {info.name} cannot be restored")
        table = sp.operator_state(operator, info.name)
        held = {
            s.index
            for s in op.subtasks
            if s.managed_operator is not None and any(e.name == info.name for e in s.managed_operator.states)
        }
        broadcast = table.column_names[1] == "key"
        values: dict[int, Any] = {i: {} if broadcast else [] for i in held}
        rows = zip(*(table.column(i).to_pylist() for i in range(3)), strict=True)
        for index, first, value in rows:
            if broadcast:
                values[index][first] = value
            else:
                values[index].append(value)
        user_key = info.user_key.type_info if info.user_key is not None else None
        for index in sorted(held):
            data = OperatorStateData(
                info.name, _MODES[info.kind], info.value.type_info, values[index], user_key
            )
            per_subtask[index].append(data)
    return per_subtask


__all__ = ["KeyGroupDecoder", "keyed_backend", "operator_backend", "operator_states", "restore_keyed"]
