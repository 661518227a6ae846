"""Writing a canonical-format Flink savepoint from one of our checkpoints or savepoints.

:func:`write_savepoint` turns each operator's keyed Value, List, Map, Reducing and
Aggregating states (keys of Flink's atomic types, Tuples, Rows and POJOs, placed in the key
groups Flink's ``hashCode()`` of them gives (:mod:`..types.key_hash`); values of those, byte[] and
Lists and Maps of them; with or without processing-time TTL), its window-namespaced states and
timers (:mod:`..streams.namespaces_write`) and its operator list, union and broadcast states into a
directory the chosen Flink release (``flink_version``, 1.13-2.3; default: the newest, or for a
Flink 1.x savepoint carried the oldest release it can be from) restores with ``flink run -s``
on either state backend (what differs by release: :class:`..metadata.versions.FlinkTarget`): per subtask one
keyed state stream (:mod:`..streams.keyed_write`) and one operator state stream
(:mod:`..streams.operator_write`), inline in ``_metadata`` when small (as Flink inlines state under
``execution.checkpointing.data-inline-threshold``) or a file beside it, and ``_metadata`` of
version 3 (:mod:`..metadata.metadata_write`) written last: every release 1.13-2.3 restores
version 3, so it is written for all of them (1.16-1.20 write 4 and 2.x 5-6 themselves, which add
only operator names, uids and checkpoint properties). Operators are named by uid (Flink's
OperatorID is the uid's hash); parallelism and max parallelism are chosen at write time,
each subtask holding Flink's key-group range and the operator state Flink's redistribution
gives it. Everything is encoded before any file is written: what cannot be written is
``[FLINK_UNSUPPORTED]`` naming the state.
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from flinkstate.state.errors import InvalidArgumentError
from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.keygroups.assignment import (
    check_max_parallelism,
    compute_key_group_range_for_operator_index,
)

from ...errors import CheckpointError
from ...manifest import METADATA
from ...progress import progress_steps
from ...reading.restore import CompletedCheckpoint
from ...storage import Storage
from ..errors import UnsupportedFlinkWriteError
from ..metadata.metadata_write import (
    KeyedOut,
    OperatorOut,
    OperatorStateOut,
    StreamOut,
    SubtaskOut,
    metadata_bytes,
)
from ..metadata.versions import FlinkTarget, at_least, default_release
from ..reader.savepoint import FlinkSavepoint, read_savepoint
from ..streams.keyed_write import keyed_stream
from ..streams.operator_write import operator_stream, subtask_states
from .flink_source import FlinkOperator
from .pyflink import holds_thread_mode, pyflink_operator
from .sources import CheckpointOperator, OperatorSource

#: Flink's default ``execution.checkpointing.data-inline-threshold`` (20 KiB).
DEFAULT_INLINE_THRESHOLD = 20 * 1024


@dataclass(frozen=True)
class _Plan:
    """One operator to write: its source and the layout chosen for it."""

    op: OperatorSource
    parallelism: int
    max_parallelism: int


def _choose(choice: int | Mapping[str, int] | None, name: str, default: int) -> int:
    if choice is None:
        return default
    if isinstance(choice, Mapping):
        return choice.get(name, default)
    return choice


def _plan(
    ops: list[OperatorSource],
    parallelism: int | Mapping[str, int] | None,
    max_parallelism: int | Mapping[str, int] | None,
) -> list[_Plan]:
    plans = []
    for op in ops:
        max_p = check_max_parallelism(_choose(max_parallelism, op.name, op.max_parallelism))
        p = _choose(parallelism, op.name, min(op.parallelism, max_p))
        compute_key_group_range_for_operator_index(max_p, p, 0)  # checks the parallelism
        if op.key_type is not None and not (max_p == op.max_parallelism and op.flink_key_groups):
            op.check_key_groups()
        plans.append(_Plan(op, p, max_p))
    if not plans:
        raise CheckpointError("no operator with keyed or operator state to write", code="NO_STATE")
    return plans


def _columns(plan: _Plan) -> dict[int, list[StateColumns | None]]:
    """Every state's entries by key group of the target max parallelism."""
    out: dict[int, list[StateColumns | None]] = {}
    op = plan.op
    n = len(op.states)
    same = plan.max_parallelism == op.max_parallelism and op.flink_key_groups
    key_type = op.key_type
    assert key_type is not None
    for i in range(n):
        for kg, cols in op.keyed_columns(i):
            if same:
                out.setdefault(kg, [None] * n)[i] = cols
                continue
            spec = op.states[i]
            if spec.carried:  # bytes: the key decoded only to place it
                for key, value in zip(cols.keys, cols.values, strict=True):
                    new = op.key_group(op.verbatim_key(spec, key), plan.max_parallelism)
                    slot = out.setdefault(new, [None] * n)
                    carried = slot[i]
                    if carried is None:
                        carried = slot[i] = StateColumns([], None, [])
                    carried.keys.append(key)
                    carried.values.append(value)
                continue
            for e in cols.entries():
                new = op.key_group(e.key, plan.max_parallelism)
                slot = out.setdefault(new, [None] * n)
                target = slot[i]
                if target is None:
                    target = slot[i] = StateColumns([], [], [], [] if cols.timestamps is not None else None)
                target.keys.append(e.key)
                target.namespaces.append(e.namespace)  # type: ignore[union-attr]
                target.values.append(e.value)
                if target.timestamps is not None:
                    target.timestamps.append(e.timestamp)
    return out


def _stream(name: str, data: bytes, inline_threshold: int) -> StreamOut:
    return StreamOut(name, len(data), data if len(data) <= inline_threshold else None)


def _encode(
    plan: _Plan,
    directory: Storage,
    inline_threshold: int,
    step: Callable[[], None],
    flink: FlinkTarget,
    suffix: str = "",
) -> tuple[OperatorOut, dict[str, bytes]]:
    """The operator's ``_metadata`` entry and the state streams that go to files, by name
    (``suffix`` ends each file's name), for release ``flink``; ``step()`` after each subtask."""
    op = plan.op
    hex_id = op.operator_id.hex()
    columns = _columns(plan) if op.key_type is not None else {}
    operator_states = subtask_states(op.operator_states(), plan.parallelism)
    subtasks, files = [], {}
    for index in range(plan.parallelism):
        where = f"{directory!r}: operator {op.name!r}, subtask {index}"
        keyed = None
        if op.key_type is not None:
            rng = compute_key_group_range_for_operator_index(plan.max_parallelism, plan.parallelism, index)
            groups = range(rng.start, rng.end + 1)
            key = op.key_serializer_snapshot()
            max_p = plan.max_parallelism
            data, offsets = keyed_stream(where, op.key_type, op.states, groups, max_p, columns, flink, key)
            keyed = KeyedOut(
                rng.start, tuple(offsets), _stream(f"keyed-{hex_id}-{index}{suffix}", data, inline_threshold)
            )
            files[keyed.stream.name] = data
        operator = None
        if operator_states[index]:
            data, entries = operator_stream(where, operator_states[index], flink)
            stream = _stream(f"operator-{hex_id}-{index}{suffix}", data, inline_threshold)
            operator = OperatorStateOut(tuple(entries), stream)
            files[stream.name] = data
        subtasks.append(SubtaskOut(index, keyed, operator))
        step()
    out = OperatorOut(op.operator_id, plan.parallelism, plan.max_parallelism, tuple(subtasks))
    inline = {st.name for sub in subtasks for st in sub.streams() if st.inline is not None}
    return out, {name: data for name, data in files.items() if name not in inline}


def flink_target(
    flink_version: str | None, source: CompletedCheckpoint | FlinkSavepoint | None
) -> FlinkTarget:
    """The release a savepoint written from ``source`` is for: ``flink_version`` (``"1.17"``,
    ``"1.17.2"``); else, for a Flink 1.x savepoint, the oldest release it can be from (which
    every release of its range restores: :func:`..metadata.versions.default_release`); else the newest."""
    if flink_version is None and isinstance(source, FlinkSavepoint):
        found = source.flink_versions
        if holds_thread_mode(source):
            found = at_least(found, (1, 16), "PyFlink thread-mode keyed state")
        return FlinkTarget.of(None, default_release(found))
    return FlinkTarget.of(flink_version)


def operators_of(
    source: CompletedCheckpoint | FlinkSavepoint,
    refs: Iterable[str] | None,
    flink: FlinkTarget,
    pyflink_mode: str | Mapping[str, str] | None = None,
) -> list[OperatorSource]:
    """The operators ``refs`` (uids; for a Flink savepoint also ids or names; default: all with
    state) of ``source``, checked for release ``flink``; ``pyflink_mode`` (one for all or by uid):
    the operators whose keyed state is written as PyFlink Python state (:mod:`.pyflink`)."""
    if isinstance(source, CompletedCheckpoint):
        entries = [source.operator(r) for r in refs] if refs is not None else list(source.manifest.operators)
        held = [
            e for e in entries if e.keyed_states or e.operator_states or any(s.files() for s in e.subtasks)
        ]
        return [
            pyflink_operator(source, e, pyflink_mode, flink) or CheckpointOperator(source, e) for e in held
        ]
    metas = [source.operator(r) for r in refs] if refs is not None else list(source.operators)
    held_metas = [m for m in metas if m.subtasks]
    return [
        pyflink_operator(source, m, pyflink_mode, flink) or FlinkOperator(source, m, flink)
        for m in held_metas
    ]


def write_savepoint(
    source: CompletedCheckpoint | FlinkSavepoint,
    target: str,
    *,
    parallelism: int | Mapping[str, int] | None = None,
    max_parallelism: int | Mapping[str, int] | None = None,
    operators: Iterable[str] | None = None,
    storage: Mapping[str, Any] | None = None,
    inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
    progress: Callable[[int, int], None] | None = None,
    pyflink_mode: str | Mapping[str, str] | None = None,
    flink_version: str | None = None,
) -> FlinkSavepoint:
    """Write ``source`` (``open_checkpoint(...)``: one of our checkpoints or savepoints, or a
    Flink savepoint read, operators keeping their ids) as a canonical Flink savepoint in the new
    directory ``target`` and return it, read back.

    ``operators``: the uids to write (default: all; of a Flink savepoint also ids or names);
    ``parallelism`` and ``max_parallelism``: one for all operators or a mapping by uid (by id
    for a Flink operator without one; default: the source's); ``storage``: fsspec options of
    ``target``; state streams of at most ``inline_threshold`` bytes go inline into
    ``_metadata``, larger ones into files beside it. ``progress(done, total)`` is called as
    the work goes: each subtask counts once when encoded and once when its files are written
    (``total`` is twice the subtasks of every operator written).
    ``pyflink_mode``: ``"process"`` or ``"thread"`` (``"process+pickled-key"``, ...: the job's
    ``key_by`` has no ``key_type``), one for all operators or a mapping by uid, writes an
    operator of one of our checkpoints as PyFlink Python state that a PyFlink job in that
    execution mode restores (:mod:`.pyflink`; a PyFlink operator of a Flink savepoint
    keeps its own).
    ``flink_version``: the Flink release to write for (``"1.17"``, ``"1.17.2"``; 1.13-2.3):
    default the newest, or for a Flink 1.x savepoint the oldest release it can be from, so that
    its own Flink restores it (:func:`flink_target`); a state that release cannot hold is
    ``[FLINK_UNSUPPORTED]`` naming it.
    """
    if not isinstance(source, CompletedCheckpoint | FlinkSavepoint):
        raise UnsupportedFlinkWriteError(
            f"write_savepoint takes a checkpoint or savepoint (open_checkpoint), not {type(source).__name__}"
        )
    checkpoint_id = (
        source.checkpoint_id if isinstance(source, CompletedCheckpoint) else source.meta.checkpoint_id
    )
    flink = flink_target(flink_version, source)
    ops = operators_of(source, operators, flink, pyflink_mode)
    return write_operators(ops, target, checkpoint_id, flink=flink, parallelism=parallelism,
                           max_parallelism=max_parallelism, storage=storage,
                           inline_threshold=inline_threshold, progress=progress)  # fmt: skip


def _target(ops: list[OperatorSource], flink: FlinkTarget | None) -> FlinkTarget:
    """The release to write ``ops`` for: ``flink``, else the one they were built for (one only)."""
    built = {op.flink for op in ops if op.flink is not None}
    if flink is not None:
        built.add(flink)
    if len(built) > 1:
        found = ", ".join(sorted(t.describe() for t in built))
        raise InvalidArgumentError(
            f"operators built for different Flink releases ({found}) cannot be written together"
        )
    return built.pop() if built else FlinkTarget()


def write_operators(
    ops: list[OperatorSource],
    target: str,
    checkpoint_id: int,
    *,
    flink: FlinkTarget | None = None,
    parallelism: int | Mapping[str, int] | None = None,
    max_parallelism: int | Mapping[str, int] | None = None,
    storage: Mapping[str, Any] | None = None,
    inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
    replace: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> FlinkSavepoint:
    """Write the operators ``ops`` as a canonical Flink savepoint for release ``flink`` (default:
    the one ``ops`` were built for, :func:`flink_target`, else the newest) in ``target`` (see
    :func:`write_savepoint`) and return it, read back. Everything is encoded before any file
    is written. ``replace``: ``target`` may hold a savepoint already; the new one's files get
    new names, its ``_metadata`` replaces the old one, then the old files are deleted (until
    then the old savepoint stays readable). ``progress``: as for :func:`write_savepoint`."""
    flink = _target(ops, flink)
    plans = _plan(ops, parallelism, max_parallelism)
    directory = Storage(target, storage)
    old = directory.exists(METADATA)
    if old and not replace:
        raise CheckpointError(f"{directory!r} already holds a savepoint", code="CHECKPOINT_EXISTS")
    before = _state_files(target, storage) if old else set()
    suffix = f"-{uuid.uuid4().hex[:12]}" if old else ""
    step = progress_steps(progress, 2 * sum(plan.parallelism for plan in plans))
    encoded = [_encode(plan, directory, inline_threshold, step, flink, suffix) for plan in plans]
    meta = metadata_bytes(checkpoint_id, [op for op, _ in encoded], f"{directory!r}/{METADATA}")
    for out, files in encoded:
        for subtask in out.subtasks:
            for stream in subtask.streams():
                if stream.name in files:
                    directory.write_bytes(stream.name, files[stream.name])
            step()
    if not old:
        directory.create_exclusive(METADATA, meta)
        return read_savepoint(target, storage)
    directory.write_bytes(METADATA, meta)
    for name in sorted(before):
        if directory.exists(name):
            directory.delete(name)
    return read_savepoint(target, storage)


def _state_files(target: str, storage: Mapping[str, Any] | None) -> set[str]:
    """The files beside ``_metadata`` that the savepoint in ``target`` references."""
    old = read_savepoint(target, storage)
    streams = [
        handle.stream
        for op in old.meta.operators
        for sub in op.subtasks
        for handle in (sub.managed_keyed, sub.managed_operator)
        if handle is not None and handle.stream is not None
    ]
    return {posixpath.basename(s.name) for s in streams if s.kind != "bytes"}
