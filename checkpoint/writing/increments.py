"""Incremental checkpoints: a state's files are its base plus the changes written since.

A subtask's keyed state in an incremental checkpoint is, per state, a chain of files
applied in order: the last full file (the base) and one delta file per later checkpoint
that changed the state. A delta file has the state's usual columns plus ``op`` (int8):
deletes (``op = 1``: the scope is removed, or for LIST and MAP replaced whole) come
before the upserts of the same key group, so applying the chain in order gives exactly
the state as of the checkpoint (see :mod:`flinkstate.checkpoint.reading.merge`).

A state is written in full instead when there is nothing to build on (the first
checkpoint, a restore, a base that went elsewhere, another parallelism or key-group
range, a changed state description), when its TTL cleans up in full snapshots (expiry
must show in every checkpoint), when its chain would grow past the :class:`ChainPolicy`,
or when an earlier checkpoint asked for it (:meth:`ChangeSet.request_full`; a compaction:
the delta is then kept beside the full file for the change feed only).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import pyarrow as pa

from flinkstate.state.descriptors import StateKind
from flinkstate.state.keyed.snapshot import (
    ChangedEntries,
    ChangeSet,
    KeyedStateSnapshot,
    StateColumns,
    StateMetaInfo,
    StateSnapshot,
)
from flinkstate.state.types.mapping import TypeInformation

from ..arrow_codec import to_arrow
from ..errors import CheckpointError
from ..fileref import slug
from ..format import keyed_schema, storage_table, write_keyed
from ..manifest import FileRef, Files, OperatorEntry, SubtaskEntry
from ..parquet_files import FileSink, WrittenFile, write_row_groups
from ..storage import Storage
from .versions import load_version, rebase

OP = pa.field("op", pa.int8(), nullable=False)


@dataclass(frozen=True)
class ChainPolicy:
    """When a state's chain of files is compacted into one full file.

    ``max_files``: most files in a chain (base included) a restore reads; ``max_bytes_ratio``:
    most bytes of the chain's deltas relative to its base's bytes.
    """

    max_files: int = 12
    max_bytes_ratio: float = 1.0

    def __post_init__(self) -> None:
        if type(self.max_files) is not int or self.max_files < 2:
            raise CheckpointError(
                f"max_chain_files must be an int of at least 2, got {self.max_files!r}",
                code="INVALID_ARGUMENT",
            )
        ratio = self.max_bytes_ratio
        if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not ratio > 0:
            raise CheckpointError(
                f"max_chain_bytes_ratio must be a positive number, got {ratio!r}", code="INVALID_ARGUMENT"
            )

    def exceeded(self, chain: Files) -> bool:
        base = sum(r.size for r in chain if not r.delta)
        deltas = sum(r.size for r in chain if r.delta)
        return len(chain) > self.max_files or deltas > self.max_bytes_ratio * base


@dataclass(frozen=True)
class BaseChain:
    """The checkpoint an increment builds on: its operator entry, paths seen from the new one."""

    checkpoint_id: int
    operator: OperatorEntry

    def subtask(self, index: int, snapshot: KeyedStateSnapshot, parallelism: int) -> SubtaskEntry | None:
        """The base's entry of subtask ``index``, if it has the same shape as ``snapshot``."""
        op = self.operator
        rng = (snapshot.key_group_range.start, snapshot.key_group_range.end)
        if (op.parallelism, op.max_parallelism, op.key_type) != (
            parallelism, snapshot.max_parallelism, snapshot.key_type,
        ):  # fmt: skip
            return None
        return next((st for st in op.subtasks if st.index == index and st.key_group_range == rng), None)


def load_base(root: Storage | None, base_id: int | None, uid: str, new_dir: str) -> BaseChain | None:
    """The base ``base_id`` under checkpoint root ``root``; ``None`` when it is gone or unreadable
    (the checkpoint is then written in full, which never depends on it)."""
    if root is None or base_id is None:
        return None
    try:
        manifest = load_version(root, base_id)
    except CheckpointError:
        return None
    op = manifest.operator(uid)
    if op is None:
        return None
    moved = rebase(replace(manifest, operators=(op,)), f"chk-{base_id}", new_dir)
    return BaseChain(base_id, moved.operators[0])


def _key_groups(groups: list[int], counts: list[int]) -> pa.Array:
    """The ``key_group`` column: each of ``groups`` repeated its count of times."""
    return pa.array(np.repeat(np.asarray(groups, np.int32), counts), pa.int32())


def _joined(parts: list[StateColumns]) -> StateColumns:
    """The columns of several key groups, one after another."""
    keys = list(itertools.chain.from_iterable(p.keys for p in parts))
    values = list(itertools.chain.from_iterable(p.values for p in parts))
    namespaces = timestamps = None
    if any(p.namespaces is not None for p in parts):
        namespaces = list(itertools.chain.from_iterable(p.namespaces or [None] * len(p) for p in parts))
    if any(p.timestamps is not None for p in parts):
        timestamps = list(itertools.chain.from_iterable(p.timestamps or [None] * len(p) for p in parts))
    return StateColumns(keys, namespaces, values, timestamps)


def _deletes_table(schema: pa.Schema, meta: StateMetaInfo, key_type: TypeInformation,
                   groups: list[tuple[int, ChangedEntries]]) -> pa.Table:  # fmt: skip
    """Every key group's delete rows (``op = 1``: key, namespace; nulls elsewhere), in order."""
    deletes = _joined([ce.deletes for _, ce in groups])
    n = len(deletes)
    arrays: dict[str, pa.Array] = {
        "key_group": _key_groups([kg for kg, _ in groups], [len(ce.deletes) for _, ce in groups]),
        "key": to_arrow(deletes.keys, key_type),
        "op": pa.repeat(pa.scalar(1, pa.int8()), n),
    }
    if meta.namespace_type is not None:
        arrays["namespace"] = to_arrow(deletes.namespaces or [None] * n, meta.namespace_type)
    return pa.Table.from_arrays([arrays.get(f.name, pa.nulls(n, f.type)) for f in schema], schema=schema)


def _upserts_table(schemas: tuple[pa.Schema, pa.Schema], meta: StateMetaInfo, key_type: TypeInformation,
                   groups: list[tuple[int, ChangedEntries]]) -> tuple[pa.Table, list[int]]:  # fmt: skip
    """Every key group's upsert rows (``op = 0``), in order, and how many rows each takes
    (a MAP entry takes one per user key)."""
    stored, schema = schemas
    parts = [ce.upserts for _, ce in groups]
    if not any(map(len, parts)):  # no columns to join (a TTL state's would have no timestamps)
        return schema.empty_table(), [0] * len(parts)
    per_entry = meta.kind is StateKind.MAP
    rows = [sum(map(len, p.values)) if per_entry else len(p) for p in parts]
    table = storage_table(meta, key_type, 0, _joined(parts), stored)
    columns = [_key_groups([kg for kg, _ in groups], rows), *table.columns[1:]]
    columns.append(pa.repeat(pa.scalar(0, pa.int8()), table.num_rows))
    return pa.Table.from_arrays(columns, schema=schema), rows


def changes_tables(
    meta: StateMetaInfo, key_type: TypeInformation, groups: Iterable[tuple[int, ChangedEntries]]
) -> tuple[pa.Schema, Iterator[tuple[int, pa.Table]]]:
    """A delta file's schema and its row groups: per key group with changes, its deletes then
    its upserts. The columns of all key groups are built at once; each row group is slices
    of them (no copy)."""
    stored = keyed_schema(meta, key_type)
    schema = stored.append(OP)
    changed = [(kg, ce) for kg, ce in groups if len(ce)]
    upserts, rows = _upserts_table((stored, schema), meta, key_type, changed)
    deletes = _deletes_table(schema, meta, key_type, changed)

    def row_groups() -> Iterator[tuple[int, pa.Table]]:
        at_delete = at_upsert = 0
        for (kg, ce), n in zip(changed, rows, strict=True):
            parts = []
            if len(ce.deletes):
                parts.append(deletes.slice(at_delete, len(ce.deletes)))
                at_delete += len(ce.deletes)
            if n:
                parts.append(upserts.slice(at_upsert, n))
                at_upsert += n
            yield kg, parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    return schema, row_groups()


def write_changes(
    meta: StateMetaInfo,
    key_type: TypeInformation,
    groups: Iterable[tuple[int, ChangedEntries]],
    keep_empty: bool = True,
    sink: FileSink | None = None,
) -> WrittenFile:
    """A delta file: per key group, deletes then upserts, with the ``op`` column, into
    ``sink`` (default: memory); ``keep_empty=False``: not left in its storage without rows."""
    schema, tables = changes_tables(meta, key_type, groups)
    # small row groups: a thread costs more
    return write_row_groups(schema, tables, pipelined=False, sink=sink, keep_empty=keep_empty)


def _changed_groups(
    state: StateSnapshot, name: str, snapshot: KeyedStateSnapshot, changes: ChangeSet
) -> Iterator[tuple[int, ChangedEntries]]:
    start = snapshot.key_group_range.start
    for kg in snapshot.key_group_range:
        ids = changes.changed(name, kg - start)
        if ids:
            yield kg, state.changed_entries(kg, ids)


class _Upserts(StateSnapshot):
    """A state empty in the base, as of the increment: its upserts are all its entries."""

    def __init__(
        self, state: StateSnapshot, name: str, snapshot: KeyedStateSnapshot, changes: ChangeSet
    ) -> None:
        self.meta = state.meta
        self._groups = dict(_changed_groups(state, name, snapshot, changes))

    def columns(self, key_group: int) -> StateColumns:
        entries = self._groups.get(key_group)
        return StateColumns([], None, []) if entries is None else entries.upserts

    def release(self) -> None:
        self._groups = {}


Store = Callable[[str, Callable[[FileSink], WrittenFile], bool], FileRef | None]


@dataclass
class KeyedFiles:
    """What a subtask's keyed snapshot became: per state its chain, and compactions' deltas."""

    files: dict[str, Files]
    changes: dict[str, Files]
    incremental: bool = False


class IncrementalKeyedWriter:
    """Writes each state of a snapshot as a delta over ``base`` or in full (module docstring).

    ``store(suffix, write, delta)`` writes a file (``write`` into the sink it is given) and
    returns its reference, or ``None`` for a file without rows not kept.
    """

    def __init__(self, store: Store, policy: ChainPolicy) -> None:
        self._store = store
        self.policy = policy

    def write(
        self, snapshot: KeyedStateSnapshot, base: BaseChain | None, subtask: int, parallelism: int
    ) -> KeyedFiles:
        store = self._store
        out = KeyedFiles({}, {})
        changes = snapshot.changes
        entry = base.subtask(subtask, snapshot, parallelism) if base is not None else None
        key_type = snapshot.key_type
        if key_type is None:
            return out
        for name, state in snapshot.states.items():
            meta = state.meta
            base_meta = base.operator.keyed_state(name) if base is not None else None
            chain: Files = entry.keyed.get(name, ()) if entry is not None else ()
            buildable = (
                changes is not None and changes.base is not None and base is not None
                and changes.base == base.checkpoint_id and entry is not None
                and (base_meta is None or meta.agrees_with(base_meta))
            )  # fmt: skip
            if state.changes_only and not buildable:
                for other, st in snapshot.states.items():
                    if st.changes_only and changes is not None:
                        changes.request_full(other)
                raise CheckpointError(
                    f"state {name!r}: the increment over checkpoint {changes and changes.base} cannot be "
                    "built (its manifest is gone, unreadable or of another shape); the next checkpoint "
                    "of this backend writes it in full",
                    code="INCREMENT_BASE_MISSING",
                )
            # expiry shows in every checkpoint: in full, and the change feed diffs full files
            if buildable and not meta.full_in_every_checkpoint:
                assert changes is not None
                requested = name in changes.requested
                groups = _changed_groups(state, name, snapshot, changes)
                ref = store(
                    f"d-{slug(name)}", partial(write_changes, meta, key_type, groups, requested), True
                )
                # asked for in full: its chain is due (compacted even when unchanged, so no
                # later increment passes the bound); the delta stays for the change feed
                if requested:
                    assert ref is not None
                    out.changes[name] = (ref,)
                elif ref is None:
                    if chain:
                        out.files[name] = chain
                        out.incremental = True
                    continue
                else:
                    grown = (*chain, ref)
                    if state.changes_only and chain:  # no frozen state to compact: ask for it next
                        if self.policy.exceeded(grown) or self.policy.exceeded((*grown, ref)):
                            changes.request_full(name)
                        out.files[name] = grown
                        out.incremental = True
                        continue
                    if not self.policy.exceeded(grown):
                        out.files[name] = grown
                        out.incremental = True
                        continue
                    out.changes[name] = (ref,)  # compaction: the delta stays for the change feed
                    if state.changes_only:  # empty in the base: the changes are every entry
                        state = _Upserts(state, name, snapshot, changes)
            full = store(
                f"k-{slug(name)}", partial(write_keyed, state, key_type, snapshot.key_group_range), False
            )
            if full is not None:
                out.files[name] = (full,)
        return out
