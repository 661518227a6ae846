"""Writing one subtask's state into a checkpoint directory.

Every data file gets a unique name (nothing is ever overwritten); the result, a small
picklable :class:`SubtaskResult`, is what the committer records in the manifest, so a
subtask can run anywhere (a thread, a Spark task) and hand it back.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial

from flinkstate.state.keyed.snapshot import KeyedStateSnapshot, StateMetaInfo
from flinkstate.state.keygroups.assignment import KeyGroupRange
from flinkstate.state.operator import OperatorStateData, OperatorStateMode
from flinkstate.state.rocksdb.native import NativeSnapshot
from flinkstate.state.types.mapping import TypeInformation

from ..errors import CheckpointError
from ..fileref import slug
from ..format import write_keyed, write_operator, write_raw_keyed, write_raw_operator
from ..manifest import FileRef, Files, OperatorStateInfo, SubtaskEntry
from ..native_entry import NativeEntry
from ..parquet_files import FileSink, WrittenFile
from ..storage import Storage
from .increments import BaseChain, ChainPolicy, IncrementalKeyedWriter
from .native import NativeWriter


@dataclass(frozen=True)
class SubtaskResult:
    """What one subtask of one operator wrote (the commit message of a task)."""

    uid: str
    parallelism: int
    max_parallelism: int
    entry: SubtaskEntry
    key_type: TypeInformation | None = None
    keyed_states: tuple[StateMetaInfo, ...] = ()
    operator_states: tuple[OperatorStateInfo, ...] = ()
    written: tuple[str, ...] = field(default=())
    """Paths (relative to the checkpoint directory) of the files written, for abort."""
    incremental: bool = False
    """Some state's files are an increment over an earlier checkpoint's."""


def file_ref(name: str, written: WrittenFile) -> FileRef:
    """How the manifest describes the data file ``name``."""
    return FileRef(
        name, written.size, written.sha256, written.rows, written.key_groups, written.footer_sha256
    )


def store_file(directory: Storage, name: str, written: WrittenFile) -> FileRef:
    """Write a data file finished in memory as ``name`` and describe it for the manifest."""
    directory.write_bytes(name, written.data)
    return file_ref(name, written)


class SubtaskWriter:
    """Writes the files of one subtask of one operator into ``directory``."""

    def __init__(
        self,
        directory: Storage,
        uid: str,
        subtask: int,
        parallelism: int,
        max_parallelism: int,
        checkpoint_id: int | None = None,
        policy: ChainPolicy | None = None,
        root: Storage | None = None,
    ) -> None:
        """``checkpoint_id`` is recorded as every file's origin; ``policy`` bounds the chains
        of incremental snapshots (a snapshot with changes and a base is written as an increment);
        ``root``: the checkpoint root ``directory`` is ``chk-<checkpoint_id>`` of (where a
        native snapshot's SST files are shared, see :mod:`.native`)."""
        self.directory = directory
        self.checkpoint_id = checkpoint_id
        self.policy = policy or ChainPolicy()
        self.incremental = False
        self.uid = uid
        self.subtask = subtask
        self.parallelism = parallelism
        self.max_parallelism = max_parallelism
        self._prefix = f"{uuid.uuid4().hex[:12]}-{slug(uid)}-{subtask}"
        self.written: list[str] = []
        self.root = root

    def _store(
        self, suffix: str, write: Callable[[FileSink], WrittenFile], delta: bool = False
    ) -> FileRef | None:
        """Write a file named by ``suffix`` streamed into the directory (``write`` writes it
        into the sink it is given); ``None`` when it had no rows and was not kept."""
        name = f"{self._prefix}-{suffix}.parquet"
        self.written.append(name)  # before a byte is written: an abort deletes it
        sink = FileSink(self.directory, name)
        written = write(sink)
        if not sink.kept:
            self.written.remove(name)
            return None
        return replace(file_ref(name, written), checkpoint_id=self.checkpoint_id, delta=delta)

    def _kept(self, suffix: str, write: Callable[[FileSink], WrittenFile]) -> FileRef:
        """:meth:`_store` of a file kept even without rows (operator and raw state)."""
        ref = self._store(suffix, write)
        if ref is None:  # ``write`` must keep a file without rows: the manifest lists it
            raise CheckpointError(
                f"the {suffix} file of operator {self.uid!r}, subtask {self.subtask}, was not kept",
                code="WRITE_FAILED",
            )
        return ref

    def keyed(
        self, snapshot: KeyedStateSnapshot, base: BaseChain | None = None
    ) -> tuple[dict[str, Files], dict[str, Files], tuple[StateMetaInfo, ...]]:
        """A file per state holding the snapshot's key groups (an empty state gets none), or,
        for a snapshot with changes, the state's chain over ``base`` (see :mod:`.increments`)."""
        metas = tuple(state.meta for state in snapshot.states.values())
        if snapshot.changes is not None:
            out = IncrementalKeyedWriter(self._store, self.policy).write(
                snapshot, base, self.subtask, self.parallelism
            )
            self.incremental = out.incremental
            return out.files, out.changes, metas
        files: dict[str, Files] = {}
        for name, state in snapshot.states.items():
            if snapshot.key_type is None:
                continue
            key_type, rng = snapshot.key_type, snapshot.key_group_range
            ref = self._store(f"k-{slug(name)}", partial(write_keyed, state, key_type, rng))
            if ref is not None:
                files[name] = (ref,)
        return files, {}, metas

    def native(self, snapshot: NativeSnapshot) -> NativeEntry:
        """A native snapshot's files (see :mod:`.native`)."""
        if self.root is None or self.checkpoint_id is None:
            raise CheckpointError(
                "a native RocksDB snapshot is written only into a checkpoint root (CheckpointStorage)",
                code="INVALID_ARGUMENT",
            )
        writer = NativeWriter(self.root, self.checkpoint_id, self._prefix, self.uid)
        try:
            return writer.write(snapshot)
        finally:
            self.written.extend(writer.written)

    def operator(
        self, states: Iterable[OperatorStateData]
    ) -> tuple[dict[str, Files], dict[str, Files], tuple[OperatorStateInfo, ...]]:
        lists: dict[str, Files] = {}
        broadcast: dict[str, Files] = {}
        infos = []
        for data in states:
            infos.append(OperatorStateInfo(data.name, data.mode, data.value_type, data.user_key_type))
            if data.mode is OperatorStateMode.BROADCAST:
                write = partial(write_operator, data.elements, data.value_type, data.user_key_type)
                broadcast[data.name] = (self._kept(f"b-{slug(data.name)}", write),)
            else:
                write = partial(write_operator, data.elements, data.value_type, None)
                lists[data.name] = (self._kept(f"o-{slug(data.name)}", write),)
        return lists, broadcast, tuple(infos)

    def write(
        self,
        keyed: KeyedStateSnapshot | None = None,
        operator: Iterable[OperatorStateData] | None = None,
        raw_keyed: dict[int, bytes] | None = None,
        raw_operator: list[bytes] | None = None,
        key_group_range: KeyGroupRange | None = None,
        base: BaseChain | None = None,
    ) -> SubtaskResult:
        """Write whatever is given; return the subtask's commit message."""
        keyed_files: dict[str, Files] = {}
        changes: dict[str, Files] = {}
        metas: tuple[StateMetaInfo, ...] = ()
        key_type = None
        rng = key_group_range
        native = None
        if isinstance(keyed, NativeSnapshot):
            native, metas = self.native(keyed), keyed.metas
            key_type, rng = keyed.key_type, keyed.key_group_range
        elif keyed is not None:
            keyed_files, changes, metas = self.keyed(keyed, base)
            key_type, rng = keyed.key_type, keyed.key_group_range
        lists, broadcast, infos = self.operator(operator or ())
        raw_k = None if not raw_keyed else self._kept("raw-keyed", partial(write_raw_keyed, raw_keyed))
        raw_o = (
            None
            if not raw_operator
            else self._kept("raw-operator", partial(write_raw_operator, raw_operator))
        )
        entry = SubtaskEntry(
            self.subtask,
            None if rng is None else (rng.start, rng.end),
            keyed_files,
            lists,
            broadcast,
            raw_k,
            raw_o,
            changes,
            None if keyed is None else keyed.watermark,
            native,
        )
        return SubtaskResult(
            self.uid,
            self.parallelism,
            self.max_parallelism,
            entry,
            key_type,
            metas,
            infos,
            tuple(self.written),
            self.incremental,
        )

    def abort(self) -> None:
        for name in self.written:
            self.directory.delete(name)
