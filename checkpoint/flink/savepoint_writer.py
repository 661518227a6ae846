"""Writing a canonical-format Flink savepoint from one of our checkpoints or savepoints.

:func:`write_savepoint` turns each operator's keyed Value, List, Map, Reducing and
Aggregating states (void namespace, keys and values of Flink's built-in atomic types, with
or without processing-time TTL) and its operator list, union and broadcast states into a
directory Flink 2.3 restores with ``flink run -s`` on either state backend: per subtask one
keyed state stream (:mod:`.write_keyed`) and one operator state stream
(:mod:`.write_operator`), inline in ``_metadata`` when small (as Flink inlines state under
``execution.checkpointing.data-inline-threshold``) or a file beside it, and ``_metadata`` of
version 3 (:mod:`.write_metadata`) written last. Operators are named by uid (Flink's
OperatorID is the uid's hash); parallelism and max parallelism are chosen at write time,
each subtask holding Flink's key-group range and the operator state Flink's redistribution
gives it. Everything is encoded before any file is written: what cannot be written is
``[FLINK_UNSUPPORTED]`` naming the state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from flinkstate.state.keyed.snapshot import StateColumns, StateMetaInfo
from flinkstate.state.keygroups.assignment import (
    assign_to_key_group,
    check_max_parallelism,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.operator import OperatorStateMode
from flinkstate.state.ttl.config import TtlTimeCharacteristic
from flinkstate.state.types.mapping import TypeInformation

from ..errors import CheckpointError
from ..manifest import METADATA, OperatorEntry
from ..merge import merge_keyed
from ..restore import CompletedCheckpoint
from ..storage import Storage
from .errors import UnsupportedFlinkWriteError
from .operator_id import operator_id_hex
from .savepoint import FlinkSavepoint, read_savepoint
from .write_keyed import KeyedStateSpec, keyed_stream
from .write_metadata import KeyedOut, OperatorOut, OperatorStateOut, StreamOut, SubtaskOut, metadata_bytes
from .write_operator import check_types, operator_stream, subtask_states
from .write_snapshots import key_snapshot

#: Flink's default ``execution.checkpointing.data-inline-threshold`` (20 KiB).
DEFAULT_INLINE_THRESHOLD = 20 * 1024


@dataclass(frozen=True)
class _Plan:
    """One operator to write: its entry in the source and what it becomes."""

    op: OperatorEntry
    key_type: TypeInformation | None  # None: no keyed state
    states: tuple[tuple[StateMetaInfo, KeyedStateSpec], ...]
    parallelism: int
    max_parallelism: int


def _spec(uid: str, meta: StateMetaInfo) -> KeyedStateSpec:
    what = f"operator {uid!r}, state {meta.name!r}"
    if meta.namespace_type is not None:
        raise UnsupportedFlinkWriteError(f"{what}: only the void namespace can be written yet")
    config = meta.ttl
    ttl = config is not None and config.is_enabled()
    if config is not None and ttl and config.time_characteristic is not TtlTimeCharacteristic.ProcessingTime:
        raise UnsupportedFlinkWriteError(f"{what}: event-time TTL has no Flink equivalent")
    spec = KeyedStateSpec(meta.name, meta.kind.name, meta.value_type, meta.user_key_type, ttl)
    spec.value_snapshot(what)  # refuses types Flink's built-in serializers do not cover
    return spec


def _choose(choice: int | Mapping[str, int] | None, uid: str, default: int) -> int:
    if choice is None:
        return default
    if isinstance(choice, Mapping):
        return choice.get(uid, default)
    return choice


def _plan(
    source: CompletedCheckpoint,
    uids: Iterable[str] | None,
    parallelism: int | Mapping[str, int] | None,
    max_parallelism: int | Mapping[str, int] | None,
) -> list[_Plan]:
    ops = [source.operator(u) for u in uids] if uids is not None else list(source.manifest.operators)
    plans = []
    for op in ops:
        if any(s.raw_keyed or s.raw_operator for s in op.subtasks):
            raise UnsupportedFlinkWriteError(
                f"operator {op.uid!r}: raw state cannot be written to a Flink savepoint yet; leave the "
                "operator out (operators=...)"
            )
        if not op.keyed_states and not op.operator_states:
            continue
        if op.keyed_states:
            assert op.key_type is not None
            key_snapshot(op.key_type, f"operator {op.uid!r}: the key")
        for info in op.operator_states:
            broadcast = info.mode is OperatorStateMode.BROADCAST
            check_types(f"operator {op.uid!r}, operator state {info.name!r}", info.value_type,
                        info.user_key_type, broadcast)  # fmt: skip
        max_p = check_max_parallelism(_choose(max_parallelism, op.uid, op.max_parallelism))
        p = _choose(parallelism, op.uid, min(op.parallelism, max_p))
        compute_key_group_range_for_operator_index(max_p, p, 0)  # checks the parallelism
        states = tuple((m, _spec(op.uid, m)) for m in op.keyed_states)
        plans.append(_Plan(op, op.key_type if op.keyed_states else None, states, p, max_p))
    if not plans:
        raise CheckpointError("no operator with keyed or operator state to write", code="NO_STATE")
    return plans


def _columns(source: CompletedCheckpoint, plan: _Plan) -> dict[int, list[StateColumns | None]]:
    """Every state's entries by key group of the target max parallelism."""
    out: dict[int, list[StateColumns | None]] = {}
    n = len(plan.states)
    same = plan.max_parallelism == plan.op.max_parallelism
    key_type = plan.key_type
    assert key_type is not None
    for i, (meta, _) in enumerate(plan.states):
        for kg, tables in source.read_keyed(plan.op.uid, meta.name):
            cols = merge_keyed(tables, meta, key_type, source.allow_pickle)
            if same:
                out.setdefault(kg, [None] * n)[i] = cols
                continue
            for e in cols.entries():
                new = assign_to_key_group(e.key, plan.max_parallelism, key_type)
                slot = out.setdefault(new, [None] * n)
                target = slot[i]
                if target is None:
                    target = slot[i] = StateColumns([], None, [], [] if cols.timestamps is not None else None)
                target.keys.append(e.key)
                target.values.append(e.value)
                if target.timestamps is not None:
                    target.timestamps.append(e.timestamp)
    return out


def _stream(name: str, data: bytes, inline_threshold: int) -> StreamOut:
    return StreamOut(name, len(data), data if len(data) <= inline_threshold else None)


def _encode(
    source: CompletedCheckpoint, plan: _Plan, directory: Storage, inline_threshold: int
) -> tuple[OperatorOut, dict[str, bytes]]:
    """The operator's ``_metadata`` entry and the state streams that go to files, by name."""
    hex_id = operator_id_hex(plan.op.uid)
    columns = _columns(source, plan) if plan.key_type is not None else {}
    specs = [spec for _, spec in plan.states]
    operator_states = subtask_states(source.operator_states(plan.op.uid), plan.parallelism)
    subtasks, files = [], {}
    for index in range(plan.parallelism):
        where = f"{directory!r}: operator {plan.op.uid!r}, subtask {index}"
        keyed = None
        if plan.key_type is not None:
            rng = compute_key_group_range_for_operator_index(plan.max_parallelism, plan.parallelism, index)
            groups = range(rng.start, rng.end + 1)
            data, offsets = keyed_stream(where, plan.key_type, specs, groups, plan.max_parallelism, columns)
            keyed = KeyedOut(
                rng.start, tuple(offsets), _stream(f"keyed-{hex_id}-{index}", data, inline_threshold)
            )
            files[keyed.stream.name] = data
        operator = None
        if operator_states[index]:
            data, entries = operator_stream(where, operator_states[index])
            stream = _stream(f"operator-{hex_id}-{index}", data, inline_threshold)
            operator = OperatorStateOut(tuple(entries), stream)
            files[stream.name] = data
        subtasks.append(SubtaskOut(index, keyed, operator))
    op = OperatorOut(plan.op.uid, plan.parallelism, plan.max_parallelism, tuple(subtasks))
    inline = {st.name for sub in subtasks for st in sub.streams() if st.inline is not None}
    return op, {name: data for name, data in files.items() if name not in inline}


def write_savepoint(
    source: CompletedCheckpoint,
    target: str,
    *,
    parallelism: int | Mapping[str, int] | None = None,
    max_parallelism: int | Mapping[str, int] | None = None,
    operators: Iterable[str] | None = None,
    storage: Mapping[str, Any] | None = None,
    inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
) -> FlinkSavepoint:
    """Write ``source`` (``open_checkpoint(...)``) as a canonical Flink savepoint in the new
    directory ``target`` and return it, read back.

    ``operators``: the uids to write (default: all); ``parallelism`` and ``max_parallelism``:
    one for all operators or a mapping by uid (default: the source's); ``storage``: fsspec
    options of ``target``; state streams of at most ``inline_threshold`` bytes go inline into
    ``_metadata``, larger ones into files beside it.
    """
    if not isinstance(source, CompletedCheckpoint):
        raise UnsupportedFlinkWriteError(
            f"write_savepoint takes one of our checkpoints or savepoints, not {type(source).__name__}"
        )
    plans = _plan(source, operators, parallelism, max_parallelism)
    directory = Storage(target, storage)
    if directory.exists(METADATA):
        raise CheckpointError(f"{directory!r} already holds a savepoint", code="CHECKPOINT_EXISTS")
    encoded = [_encode(source, plan, directory, inline_threshold) for plan in plans]
    meta = metadata_bytes(source.checkpoint_id, [op for op, _ in encoded], f"{directory!r}/{METADATA}")
    for _, files in encoded:
        for name, data in files.items():
            directory.write_bytes(name, data)
    directory.create_exclusive(METADATA, meta)
    return read_savepoint(target, storage)
