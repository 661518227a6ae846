"""One side of a diff: one of our checkpoints or a Flink savepoint, read as the plain reader reads it.

Keyed state is read as flattened view rows (one row per value, list element, map entry) per key
group, TTL-expired entries hidden as a read hides them; operator list state as its elements,
broadcast state as one subtask's map. A side is picklable (it travels to Spark executors).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.state.descriptors import StateKind
from flinkstate.state.operator import OperatorStateMode
from flinkstate.state.types.mapping import TypeInformation

from ..errors import CheckpointNotFoundError
from ..opening import open_checkpoint
from ..reading.keys import rows_of_keys
from ..reading.restore import CompletedCheckpoint
from ..views.rows import expiry_cutoff, key_group_rows, operator_rows
from ..views.schemas import keyed_view_schema, operator_view_schema

if TYPE_CHECKING:
    from ..flink.reader.savepoint import FlinkSavepoint

TIMER_PREFIX = "_timer_state/"
"""Keyed states of this prefix hold timers (a whole-snapshot diff leaves them out)."""
_KINDS = {"VALUE": StateKind.VALUE, "LIST": StateKind.LIST, "MAP": StateKind.MAP,
          "REDUCING": StateKind.REDUCING, "AGGREGATING": StateKind.AGGREGATING}  # fmt: skip


@dataclass(frozen=True)
class KeyedSide:
    """What a diff needs of one side's keyed state: ``cutoff`` hides expired entries (``None``:
    none), ``key_type`` selects keys and computes their groups (``None``: keys cannot be chosen)."""

    kind: StateKind
    schema: pa.Schema
    max_parallelism: int
    stored: frozenset[int]
    key_type: TypeInformation | None
    cutoff: int | None


@dataclass(frozen=True)
class StateName:
    """A state of a side: its operator's uid (or hex id), its name, and whether it is keyed."""

    operator: str
    state: str
    keyed: bool


class OurSide:
    """One of our checkpoints or savepoints."""

    def __init__(self, checkpoint: CompletedCheckpoint, label: str) -> None:
        self.checkpoint = checkpoint
        self.label = label
        self.checkpoint_id: int | None = checkpoint.checkpoint_id

    def states(self) -> list[StateName]:
        out = []
        for op in self.checkpoint.manifest.operators:
            out += [
                StateName(op.uid, m.name, True)
                for m in op.keyed_states
                if not m.name.startswith(TIMER_PREFIX)
            ]
            out += [StateName(op.uid, i.name, False) for i in op.operator_states]
        return out

    def keyed(self, operator: str, state: str, include_expired: bool, now_ms: int) -> KeyedSide | None:
        op = self.checkpoint.manifest.operator(operator)
        meta = None if op is None else op.keyed_state(state)
        if op is None or meta is None:
            return None
        watermark = self.checkpoint.manifest.watermark(op.uid)
        cutoff = None if include_expired else expiry_cutoff(meta, watermark, now_ms)
        stored = frozenset(kg for st in op.subtasks for kg in st.stored_key_groups(state))
        return KeyedSide(meta.kind, keyed_view_schema(meta, op.key_type, True), op.max_parallelism, stored,
                         op.key_type, cutoff)  # fmt: skip

    def read(
        self, operator: str, state: str, side: KeyedSide, groups: set[int], keys: list[Any] | None
    ) -> Iterator[tuple[int, pa.Table]]:
        """(key group, its view rows) of the wanted key groups holding rows."""
        meta = self.checkpoint.state_meta(operator, state)
        key_type = self.checkpoint.operator(operator).key_type
        for kg, tables in self.checkpoint.read_keyed(operator, state, groups):
            pickle = self.checkpoint.allow_pickle
            rows = key_group_rows(tables, kg, meta, key_type, keys=keys, flatten=True,
                                  expired_before=side.cutoff, allow_pickle=pickle)  # fmt: skip
            if rows is not None:
                yield kg, rows

    def files_of(self, operator: str, state: str) -> Mapping[int, frozenset[tuple[str, str]]] | None:
        """Key group -> the (file URL, SHA-256) of every file that may hold its entries; ``None``
        when a subtask is held as native RocksDB files (not compared file by file)."""
        op = self.checkpoint.operator(operator)
        if any(st.native is not None for st in op.subtasks):
            return None
        root = self.checkpoint.directory.url
        out: dict[int, set[tuple[str, str]]] = {}
        for st in op.subtasks:
            for ref in st.keyed.get(state, ()):
                name = (posixpath.normpath(posixpath.join(root, ref.path)), ref.sha256)
                for kg in ref.key_groups or st.stored_key_groups(state):
                    out.setdefault(kg, set()).add(name)
        return {kg: frozenset(names) for kg, names in out.items()}

    def operator_table(self, operator: str, state: str) -> tuple[bool, pa.Table]:
        """(broadcast, the state's rows: ``subtask, position, value`` or ``key, value``)."""
        op = self.checkpoint.manifest.operator(operator)
        infos = [] if op is None else [i for i in op.operator_states if i.name == state]
        if op is None or not infos:
            raise CheckpointNotFoundError(
                f"operator {operator!r} has no operator state {state!r} in {self.label}"
            )
        info = infos[0]
        broadcast = info.mode is OperatorStateMode.BROADCAST
        schema = operator_view_schema(info.value_type, info.user_key_type if broadcast else None)
        tables = []
        for st in op.subtasks:
            refs = (st.broadcast if broadcast else st.operator).get(state, ())
            rows = operator_rows(self.checkpoint.directory, refs, st.index, broadcast) if refs else None
            if rows is not None:
                tables.append(rows.cast(schema))
            if broadcast and refs:  # every subtask holds the same map
                break
        return broadcast, pa.concat_tables(tables) if tables else schema.empty_table()


class FlinkSide:
    """A Flink savepoint or retained checkpoint (read by :mod:`flinkstate.checkpoint.flink`)."""

    def __init__(self, savepoint: FlinkSavepoint, label: str) -> None:
        self.savepoint = savepoint
        self.label = label
        self.checkpoint_id = savepoint.meta.checkpoint_id

    def states(self) -> list[StateName]:
        return [
            StateName(s.operator_uid or s.operator_id, s.name, s.kind in _KINDS)
            for s in self.savepoint.states()
        ]

    def keyed(self, operator: str, state: str, include_expired: bool, now_ms: int) -> KeyedSide | None:
        sp = self.savepoint
        try:
            found = sp.keyed_info(operator, state)
        except CheckpointNotFoundError:  # no such operator: the state is not here
            return None
        if found is None:
            return None
        op = sp.operator(operator)
        stored = frozenset(
            kg for s in op.subtasks if s.managed_keyed is not None for kg in s.managed_keyed.key_groups
        )
        from ..flink.reader.tables import hashed_key_type

        kind = _KINDS[found[1].kind]
        return KeyedSide(kind, sp.schema(operator, state), op.max_parallelism, stored,
                         hashed_key_type(sp, operator, state), None)  # fmt: skip

    def read(
        self, operator: str, state: str, side: KeyedSide, groups: set[int], keys: list[Any] | None
    ) -> Iterator[tuple[int, pa.Table]]:
        table = self.savepoint.keyed_state(operator, state, sorted(groups))
        if keys is not None:
            assert side.key_type is not None  # keys are refused for a state without one
            table = rows_of_keys(table, keys, side.key_type)
        if not table.num_rows:
            return
        column = np.asarray(table.column("key_group").to_numpy(zero_copy_only=False))
        order = np.argsort(column, kind="stable")
        sorted_groups = column[order]
        table = table.take(pa.array(order))
        starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
        for start, end in zip(starts, [*starts[1:], len(order)], strict=True):
            yield int(sorted_groups[start]), table.slice(int(start), int(end - start))

    def files_of(self, operator: str, state: str) -> Mapping[int, frozenset[tuple[str, str]]] | None:
        return None

    def operator_table(self, operator: str, state: str) -> tuple[bool, pa.Table]:
        table = self.savepoint.operator_state(operator, state)
        if "key" not in table.column_names:
            return False, table
        if table.num_rows:  # every subtask holds the same map: compare one copy
            first = min(table.column("subtask").to_pylist())
            table = table.filter(pc.equal(table.column("subtask"), first))
        return True, table.drop_columns(["subtask"])


Side = OurSide | FlinkSide


def open_side(
    path: str,
    storage: Mapping[str, Any] | None = None,
    checkpoint_id: int | None = None,
    allow_pickle: bool = False,
    types: Mapping[str, Any] | None = None,
) -> Side:
    """The snapshot at ``path`` as a side (a root: its latest completed checkpoint, or
    ``checkpoint_id``), opened as :func:`~flinkstate.checkpoint.open_checkpoint` opens it."""
    opened = open_checkpoint(path, storage, checkpoint_id, allow_pickle, types)
    if isinstance(opened, CompletedCheckpoint):
        return OurSide(opened, f"checkpoint {opened.checkpoint_id} at {path}")
    return FlinkSide(opened, f"Flink savepoint at {path}")
