"""Operator states of a Flink savepoint: every subtask's meta infos, and a state's elements
as a table (``subtask, position, value``; broadcast state ``subtask, key, value``) or as one
subtask's Python values (:mod:`..streams.operator_read` reads the streams)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...arrow_codec import from_arrow
from ...errors import CheckpointNotFoundError
from ..metadata.metadata_read import OperatorMeta
from ..streams.header_read import StateInfo, union_states
from ..streams.operator_read import read_operator_header, read_operator_state
from .tables import broadcast_table, operator_table


def operator_infos(op: OperatorMeta, directory: str, storage: Mapping[str, Any]) -> list[StateInfo]:
    """The operator states of every subtask's header (not the first subtask's alone)."""
    headers = []
    for sub in op.subtasks:
        handle = sub.managed_operator
        if handle is not None and handle.stream is not None:
            data = handle.stream.read(directory, storage)
            headers.append(read_operator_header(data, f"{directory}: {handle.stream.name}")[1].values())
    return union_states(headers, f"{directory}: operator {op.uid or op.operator_id}", "operator state")


def empty_operator_table(info: StateInfo) -> pa.Table:
    """The table :func:`operator_state` gives for ``info``, without rows."""
    if info.kind == "BROADCAST":
        return broadcast_table([], [], [], info.user_key, info.value)  # type: ignore[arg-type]
    return operator_table([], [], [], info.value)


def operator_state(
    op: OperatorMeta, ref: str, state: str, directory: str, storage: Mapping[str, Any]
) -> pa.Table:
    """Operator list/union state ``state`` (``subtask, position, value``) or broadcast state
    (``subtask, key, value``) of ``op`` (``ref``: how the caller named it)."""
    subtasks: list[int] = []
    firsts: list[object] = []
    values: list[object] = []
    info: StateInfo | None = None
    for sub in op.subtasks:
        handle = sub.managed_operator
        if handle is None or handle.stream is None or all(e.name != state for e in handle.states):
            continue
        data = handle.stream.read(directory, storage)
        where = f"{directory}: operator {ref}, file {handle.stream.name}"
        info, f, v = read_operator_state(data, handle, state, where)
        subtasks += [sub.index] * len(v)
        firsts += f
        values += v
    if info is None:
        raise CheckpointNotFoundError(f"operator {ref!r} has no operator state {state!r}")
    if info.kind == "BROADCAST":
        assert info.user_key is not None
        return broadcast_table(subtasks, firsts, values, info.user_key, info.value)
    return operator_table(subtasks, firsts, values, info.value)


def subtask_values(table: pa.Table, info: StateInfo, subtask: int) -> Any:
    """One subtask's elements (a list) or broadcast map (a dict) in ``table`` (of
    :func:`operator_state`), as our Python values (rows and POJOs as tuples)."""
    table = table.filter(pc.equal(table.column(0), subtask))
    assert info.value.type_info is not None  # operator states have no void or timer types
    values = from_arrow(table.column(2), info.value.type_info)
    if info.user_key is not None and info.user_key.type_info is not None:
        return dict(zip(from_arrow(table.column(1), info.user_key.type_info), values, strict=True))
    return values
