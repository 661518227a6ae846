"""Offline edits of one of our checkpoints or savepoints, written as a new savepoint.

Removing an operator or a state and renaming an operator change only the manifest: every
file the edited savepoint keeps is copied (checked against its checksum) into the new
directory, so it is self-contained and the source is never touched. A state set from rows
is written per subtask through :class:`.writer.SubtaskWriter`, as a restore-and-snapshot
would write it. A new max parallelism goes through :func:`.rewrite.rewrite_max_parallelism`
(every key reassigned), from the edited source (staged in memory when states are set).
The manifest is derived from the source's (:func:`.committer.derive_manifest`) and published
by :func:`.committer.publish_manifest`, after every data file: a failure deletes what was
written and leaves the destination without a savepoint.
"""

from __future__ import annotations

import hashlib
import posixpath
import uuid
from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from flinkstate.state.heap.backend import HeapKeyedStateBackend
from flinkstate.state.keyed.snapshot import StateColumns, StateMetaInfo
from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index

from ..edits import (
    EditPlan,
    KeyedRows,
    OperatorLayout,
    OperatorPlan,
    SavepointEdits,
    plan_edits,
    rows_by_key_group,
)
from ..errors import CheckpointCorruptError, CheckpointError, CheckpointNotFoundError
from ..manifest import METADATA, FileRef, OperatorEntry, SubtaskEntry
from ..native_entry import NativeEntry
from ..reading.restore import CompletedCheckpoint
from ..reading.verified import CHUNK
from ..storage import Storage
from .committer import derive_manifest, publish_manifest
from .rewrite import rewrite_max_parallelism
from .writer import SubtaskWriter

EDITED_PROPERTY = "flinkstate.edited_from_checkpoint"
"""The property recording the checkpoint id an edited savepoint was made from."""


def layouts(source: CompletedCheckpoint) -> list[OperatorLayout]:
    """What :func:`.edits.plan_edits` needs of each operator of ``source``."""
    return [
        OperatorLayout(
            op.uid,
            op.parallelism,
            op.max_parallelism,
            {m.name: m for m in op.keyed_states},
            frozenset(i.name for i in op.operator_states),
            op.key_type,
        )
        for op in source.manifest.operators
    ]


def plan_checkpoint_edits(source: CompletedCheckpoint, edits: SavepointEdits) -> EditPlan:
    """``edits`` checked against ``source`` (nothing read or written): what would change."""
    return plan_edits(layouts(source), edits)


def _entry(source: CompletedCheckpoint, plan: OperatorPlan) -> OperatorEntry:
    """The source's operator the plan edits; an added one: new and empty."""
    layout = plan.source
    found = source.manifest.operator(layout.name)
    return (
        found if found is not None else OperatorEntry(layout.name, layout.parallelism, layout.max_parallelism)
    )


def _without(files: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
    return {name: refs for name, refs in files.items() if name not in names}


def _edited_entry(op: OperatorEntry, plan: OperatorPlan) -> OperatorEntry:
    """``op`` renamed and without its removed states and the files of the states set (an
    edited savepoint keeps no change feed: its changes are of the source's predecessor)."""
    keyed = plan.removed_keyed | {r.name for r in plan.set_states}
    subtasks = tuple(
        replace(st, keyed=_without(st.keyed, keyed), changes={},
                operator=_without(st.operator, plan.removed_operator),
                broadcast=_without(st.broadcast, plan.removed_operator))
        for st in op.subtasks
    )  # fmt: skip
    return replace(
        op,
        uid=plan.uid,
        keyed_states=tuple(m for m in op.keyed_states if m.name not in plan.removed_keyed),
        operator_states=tuple(i for i in op.operator_states if i.name not in plan.removed_operator),
        subtasks=subtasks,
    )


class _Copier:
    """Copies the files an edited manifest references into the new directory, once each."""

    def __init__(self, source: Storage, target: Storage, checkpoint_id: int, written: list[str]) -> None:
        self.source, self.target, self.checkpoint_id, self.written = source, target, checkpoint_id, written
        self.copies: dict[str, FileRef] = {}

    def file(self, ref: FileRef) -> FileRef:
        """``ref``'s file copied, streamed (an SST file may be large) and checked as it goes."""
        if ref.path not in self.copies:
            name = f"{uuid.uuid4().hex[:12]}-{posixpath.basename(ref.path)}"
            self.written.append(name)
            sha, size = hashlib.sha256(), 0
            try:
                with self.source.open_input(ref.path) as src, self.target.open_output(name) as dst:
                    while chunk := src.read(CHUNK):
                        sha.update(chunk)
                        size += len(chunk)
                        dst.write(chunk)
            except CheckpointNotFoundError as exc:
                raise CheckpointCorruptError(f"data file {ref.path} is missing") from exc
            if size != ref.size or sha.hexdigest() != ref.sha256:
                raise CheckpointCorruptError(
                    f"data file {ref.path} does not match its checksum: truncated or altered"
                )
            self.copies[ref.path] = replace(ref, path=name, checkpoint_id=self.checkpoint_id)
        return self.copies[ref.path]

    def subtask(self, st: SubtaskEntry) -> SubtaskEntry:
        """``st`` with every file copied, field by field (a field added later is copied too),
        native RocksDB files too."""
        changed: dict[str, Any] = {}
        for f in fields(SubtaskEntry):
            value = getattr(st, f.name)
            if isinstance(value, FileRef):
                changed[f.name] = self.file(value)
            elif isinstance(value, NativeEntry):
                changed[f.name] = value.moved(self.file)
            elif isinstance(value, Mapping):
                changed[f.name] = {n: tuple(self.file(r) for r in refs) for n, refs in value.items()}
        return replace(st, **changed)


def _set_states(op: OperatorEntry, states: tuple[KeyedRows, ...], directory: Storage, checkpoint_id: int,
                written: list[str]) -> OperatorEntry:  # fmt: skip
    """``op`` with ``states`` written per subtask (replacing states of the same names)."""
    if not states:
        return op
    p, max_p = op.parallelism, op.max_parallelism
    metas = []
    for r in states:
        assert r.kind is not None and r.value_type is not None  # completed by the plan
        metas.append(StateMetaInfo(r.name, r.kind, r.value_type, r.user_key_type, None, r.ttl))
    columns = [rows_by_key_group(r, max_p) for r in states]
    key_type = op.key_type or states[0].key_type
    by_index = {st.index: st for st in op.subtasks}
    subtasks = []
    for index in range(p):
        rng = compute_key_group_range_for_operator_index(max_p, p, index)
        backend = HeapKeyedStateBackend(key_type=key_type, max_parallelism=max_p, key_group_range=rng)
        for meta, cols in zip(metas, columns, strict=True):
            for kg in [kg for kg in cols if kg in rng] or [rng.start]:
                backend.restore_state(meta, kg, cols.get(kg, StateColumns([], None, [])))
        writer = SubtaskWriter(directory, op.uid, index, p, max_p, checkpoint_id)
        with backend.snapshot() as snapshot:
            try:
                files = writer.keyed(snapshot)[0]
            finally:
                written.extend(writer.written)
        backend.close()
        st = by_index.get(index, SubtaskEntry(index))
        subtasks.append(replace(st, keyed={**st.keyed, **files}, key_group_range=(rng.start, rng.end)))
    names = {m.name for m in metas}
    kept = tuple(m for m in op.keyed_states if m.name not in names)
    return replace(op, key_type=key_type, keyed_states=kept + tuple(metas), subtasks=tuple(subtasks))


def _write(source: CompletedCheckpoint, plan: EditPlan, directory: Storage) -> CompletedCheckpoint:
    """The edited savepoint (at the source's max parallelism) in ``directory``."""
    checkpoint_id = source.checkpoint_id
    written: list[str] = []
    copier = _Copier(source.directory, directory, checkpoint_id, written)
    try:
        entries = []
        for op_plan in plan.operators:
            op = _edited_entry(_entry(source, op_plan), op_plan)
            op = replace(op, subtasks=tuple(copier.subtask(st) for st in op.subtasks))
            entries.append(_set_states(op, op_plan.set_states, directory, checkpoint_id, written))
        base = replace(source.manifest, operators=())
        manifest = derive_manifest(base, checkpoint_id, "savepoint", entries,
                                   {EDITED_PROPERTY: str(checkpoint_id)})  # fmt: skip
    except BaseException:
        for name in written:
            directory.delete(name)
        raise
    # a publish whose outcome is unknown keeps the files (its manifest may still land)
    publish_manifest(directory, manifest, written)
    return CompletedCheckpoint(directory, manifest, source.allow_pickle)


def edit_checkpoint(
    source: CompletedCheckpoint,
    target: str,
    edits: SavepointEdits,
    storage: Mapping[str, Any] | None = None,
) -> CompletedCheckpoint:
    """Write ``source`` (``open_checkpoint(...)``) with ``edits`` applied as a new savepoint in
    the directory ``target`` (``storage``: its fsspec options) and return it. The source is
    not changed; a failure leaves ``target`` without a savepoint."""
    if not isinstance(source, CompletedCheckpoint):
        raise CheckpointError(
            f"edit_checkpoint edits our checkpoints (a Flink savepoint: flink.edit_savepoint), "
            f"not {type(source).__name__}",
            code="UNSUPPORTED_FORMAT",
        )
    plan = plan_checkpoint_edits(source, edits)
    directory = Storage(target, storage)
    if directory.exists(METADATA):
        raise CheckpointError(f"{directory!r} already holds a savepoint", code="CHECKPOINT_EXISTS")
    max_p = plan.max_parallelism
    if max_p is None or all(op.source.max_parallelism == max_p for op in plan.operators):
        return _write(source, plan, directory)
    if not any(op.set_states for op in plan.operators):  # rewrite straight from the edited view
        ops = tuple(_edited_entry(_entry(source, op), op) for op in plan.operators)
        view = CompletedCheckpoint(
            source.directory, replace(source.manifest, operators=ops), source.allow_pickle
        )
        return rewrite_max_parallelism(view, target, max_p, storage)
    staging = Storage(f"memory://flinkstate-edit/{uuid.uuid4().hex}")
    try:
        return rewrite_max_parallelism(_write(source, plan, staging), target, max_p, storage)
    finally:
        staging.delete("")
