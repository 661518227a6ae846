"""Reading a completed checkpoint or savepoint back: keyed state by key group, operator
state by mode, raw state — for any subtask of any parallelism.

Only the files that hold key groups a subtask owns are opened, and in them only those
key groups' row groups are read.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator
from typing import Any

import pyarrow as pa

from flinkstate.state.heap.backend import HeapKeyedStateBackend
from flinkstate.state.keyed.backend import AbstractKeyedStateBackend
from flinkstate.state.keyed.snapshot import StateColumns, StateMetaInfo
from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index
from flinkstate.state.operator import OperatorStateBackend, OperatorStateData, OperatorStateMode, repartition
from flinkstate.state.rocksdb.backend import RocksDBKeyedStateBackend

from ..errors import CheckpointError, StateMigrationError
from ..format import read_operator
from ..manifest import Manifest, OperatorEntry
from ..parquet_files import read_row_group
from ..storage import Storage
from .keyed_files import key_group_files, read_key_groups
from .merge import merge_keyed_slices
from .native import native_key_groups, reopen_native, restore_native
from .verified import open_ranges, open_whole

RESTORE_BATCH = 16
"""Key groups a restore decodes at a time (their tables are held together)..."""
RESTORE_ROWS = 1 << 20
"""... and rows (one larger key group alone): what a restore holds does not grow with the state."""


class CompletedCheckpoint:
    """A committed checkpoint or savepoint: its manifest and the directory holding it."""

    def __init__(self, directory: Storage, manifest: Manifest, allow_pickle: bool = False) -> None:
        self.directory = directory
        self.manifest = manifest
        self.allow_pickle = allow_pickle

    @property
    def checkpoint_id(self) -> int:
        return self.manifest.checkpoint_id

    def operator(self, uid: str) -> OperatorEntry:
        op = self.manifest.operator(uid)
        if op is None:
            known = sorted(o.uid for o in self.manifest.operators)
            raise CheckpointError(f"no operator {uid!r} in checkpoint {self.checkpoint_id}; it has {known}",
                                  code="UNKNOWN_OPERATOR")  # fmt: skip
        return op

    # -- keyed state -------------------------------------------------------------------

    def read_keyed(
        self, uid: str, state: str, key_groups: Container[int] | None = None
    ) -> Iterator[tuple[int, list[pa.Table]]]:
        """(key group, its Arrow tables in file order) of a state, optionally limited to
        ``key_groups``, subtask by subtask: :func:`.keyed_files.read_key_groups` (only files
        holding wanted key groups are opened, only those row groups read, every file checked);
        subtasks held as native RocksDB files are decoded from them (see :mod:`.native`)."""
        meta = self.state_meta(uid, state)
        op = self.operator(uid)
        if any(st.native is not None for st in op.subtasks):
            yield from native_key_groups(self.directory, op, meta, self.checkpoint_id, key_groups)
        yield from self._read_files(op, state, key_groups)

    def _read_files(
        self, op: OperatorEntry, state: str, key_groups: Container[int] | None
    ) -> Iterator[tuple[int, list[pa.Table]]]:
        """:meth:`read_keyed` of the subtasks held as Parquet files."""
        directory, checkpoint_id = self.directory, self.checkpoint_id
        for subtask in op.subtasks:
            files = key_group_files(subtask.keyed.get(state, ()), key_groups)
            yield from read_key_groups(
                directory, files, checkpoint_id, batch=RESTORE_BATCH, threads=True, max_rows=RESTORE_ROWS
            )

    def restore_keyed(self, backend: AbstractKeyedStateBackend, uid: str) -> None:
        """Load into ``backend`` every key group of its range (at any parallelism): subtasks
        held as native RocksDB files first (see :mod:`.native`), then those held as Parquet."""
        op = self.operator(uid)
        if op.max_parallelism != backend.max_parallelism:
            raise StateMigrationError(
                f"operator {uid!r} was checkpointed with max parallelism {op.max_parallelism}; the backend "
                f"has {backend.max_parallelism}: rewrite the savepoint with rewrite_max_parallelism() first"
            )
        backend.restore_key_type(op.key_type)
        watermark = self.manifest.watermark(uid)
        if watermark is not None:  # event-time TTL goes on from where the checkpoint was
            backend.advance_watermark(watermark)
        if any(st.native is not None for st in op.subtasks):
            restore_native(backend, self.directory, op, self.checkpoint_id)
        for meta in op.keyed_states:
            registered = meta.name in backend.state_names()
            for kg, tables in self._read_files(op, meta.name, backend.key_group_range):
                assert op.key_type is not None
                for columns in merge_keyed_slices(tables, meta, op.key_type, self.allow_pickle):
                    backend.restore_state(meta, kg, columns)
                    registered = True
            if not registered:  # no entries in this range: still known to the backend
                backend.restore_state(meta, backend.key_group_range.start, StateColumns([], None, []))

    def keyed_backend(
        self,
        uid: str,
        subtask: int,
        parallelism: int,
        backend_factory: Callable[..., AbstractKeyedStateBackend] = HeapKeyedStateBackend,
        **backend_args: Any,
    ) -> AbstractKeyedStateBackend:
        """A new backend for subtask ``subtask`` of ``parallelism``, restored."""
        op = self.operator(uid)
        rng = compute_key_group_range_for_operator_index(op.max_parallelism, parallelism, subtask)
        backend = backend_factory(max_parallelism=op.max_parallelism, key_group_range=rng, **backend_args)
        try:
            self.restore_keyed(backend, uid)
        except BaseException:
            backend.close()  # a RocksDB backend's directory is free again
            raise
        return backend

    def reopen_keyed(
        self,
        uid: str,
        subtask: int,
        parallelism: int,
        backend_factory: Callable[..., AbstractKeyedStateBackend],
        source: str,
        **backend_args: Any,
    ) -> RocksDBKeyedStateBackend:
        """:meth:`keyed_backend` for a native RocksDB subtask whose DB this machine kept:
        local directory ``source`` holds exactly that subtask's DB as this checkpoint has it
        (the caller's to know), and becomes the new backend's (moved; nothing downloaded)."""
        op = self.operator(uid)
        rng = compute_key_group_range_for_operator_index(op.max_parallelism, parallelism, subtask)
        backend = backend_factory(max_parallelism=op.max_parallelism, key_group_range=rng, **backend_args)
        try:
            if not isinstance(backend, RocksDBKeyedStateBackend):
                raise CheckpointError(
                    f"a kept RocksDB DB reopens as a RocksDB backend, not {type(backend).__name__}",
                    code="INVALID_ARGUMENT",
                )
            backend.restore_key_type(op.key_type)
            watermark = self.manifest.watermark(uid)
            if watermark is not None:
                backend.advance_watermark(watermark)
            reopen_native(backend, op, subtask, source)
        except BaseException:
            backend.close()
            raise
        return backend

    def state_meta(self, uid: str, state: str) -> StateMetaInfo:
        op = self.operator(uid)
        meta = op.keyed_state(state)
        if meta is None:
            names = [s.name for s in op.keyed_states]
            raise CheckpointError(f"operator {uid!r} has no keyed state {state!r}; it has {names}",
                                  code="UNKNOWN_STATE")  # fmt: skip
        return meta

    # -- operator and raw state --------------------------------------------------------

    def operator_states(self, uid: str) -> list[list[OperatorStateData]]:
        """Operator states of each subtask index below the operator's parallelism, as written
        (none for a subtask that wrote none): what :func:`repartition` takes."""
        op = self.operator(uid)
        infos = {(i.mode is OperatorStateMode.BROADCAST, i.name): i for i in op.operator_states}
        out: list[list[OperatorStateData]] = [[] for _ in range(op.parallelism)]
        for subtask in op.subtasks:
            states = []
            for broadcast, files in ((False, subtask.operator), (True, subtask.broadcast)):
                for name, refs in files.items():
                    info = infos[(broadcast, name)]
                    key_type = info.user_key_type if broadcast else None
                    parts = [
                        read_operator(
                            open_whole(self.directory, r),
                            r.path,
                            info.value_type,
                            key_type,
                            self.allow_pickle,
                        )
                        for r in refs
                    ]
                    elements: Any = (
                        {k: v for p in parts for k, v in p.items()}
                        if broadcast
                        else [e for p in parts for e in p]
                    )
                    states.append(
                        OperatorStateData(name, info.mode, info.value_type, elements, info.user_key_type)
                    )
            out[subtask.index] = states
        return out

    def operator_backend(self, uid: str, subtask: int, parallelism: int) -> OperatorStateBackend:
        """Operator state for subtask ``subtask`` of ``parallelism`` (split, union, broadcast)."""
        return OperatorStateBackend(repartition(self.operator_states(uid), parallelism)[subtask])

    def raw_keyed(self, uid: str, subtask: int, parallelism: int) -> dict[int, bytes]:
        """The raw keyed state bytes of the key groups subtask ``subtask`` owns."""
        op = self.operator(uid)
        rng = compute_key_group_range_for_operator_index(op.max_parallelism, parallelism, subtask)
        out: dict[int, bytes] = {}
        for entry in op.subtasks:
            ref = entry.raw_keyed
            if ref is None:
                continue
            wanted = [kg for kg in sorted(ref.key_groups) if kg in rng]
            if wanted:
                pf = open_ranges(self.directory, ref)
                for kg in wanted:
                    table = read_row_group(pf, ref.key_groups[kg][0], ref.path)
                    out[kg] = table.column("data")[0].as_py()
        return out

    def raw_operator(self, uid: str, subtask: int, parallelism: int) -> list[bytes]:
        """Raw operator state blobs, redistributed like split-distributed list state."""
        op = self.operator(uid)
        old: list[list[bytes]] = [[] for _ in range(op.parallelism)]
        for entry in op.subtasks:
            if entry.raw_operator is not None:
                table = open_whole(self.directory, entry.raw_operator).read()
                order = table.column("position").to_pylist()
                old[entry.index] = [
                    b for _, b in sorted(zip(order, table.column("data").to_pylist(), strict=True))
                ]
        from flinkstate.state.types.mapping import Types

        raw = Types.PRIMITIVE_ARRAY(Types.BYTE())
        parts = [[OperatorStateData("raw", OperatorStateMode.SPLIT_DISTRIBUTE, raw, b)] for b in old]
        new = repartition(parts, parallelism)[subtask]
        return list(new[0].elements) if new else []
