"""The RocksDB keyed state backend: state larger than memory, one column family per state."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from ..descriptors import AggregatingStateDescriptor, ReducingStateDescriptor, StateDescriptor, StateKind
from ..errors import SerializationError, StateAccessError
from ..extras import require
from ..heap.restore import stored_migration, stored_states
from ..interfaces import InternalKvState, StateIncrementalVisitor
from ..keyed.backend import AbstractKeyedStateBackend
from ..keyed.migration import Migrate
from ..keyed.snapshot import Changed, ColumnTransform, KeyedStateSnapshot, StateColumns, StateMetaInfo
from ..keygroups.assignment import KeyGroupRange, check_max_parallelism
from ..ttl.factory import clock as ttl_clock
from ..ttl.factory import snapshot_transform
from ..types.mapping import TypeInformation
from .aggregating_state import RocksDBAggregatingState
from .base import AbstractRocksDBState
from .cleanup import RocksDBIncrementalVisitor, TtlCompactionSweep
from .codec import KeyCodec, prefix_end
from .column import LOAD_CHUNK, StateColumn, WriteBuffer
from .directory import DB, DbDirectory
from .list_state import RocksDBListState
from .map_state import RocksDBMapState
from .native import NativeSnapshot, take
from .options import RocksDBMemory, RocksDBOptions
from .reducing_state import RocksDBReducingState
from .snapshot import RocksDBStateSnapshot
from .value_state import RocksDBValueState

_KINDS: dict[StateKind, type[AbstractRocksDBState]] = {
    StateKind.VALUE: RocksDBValueState,
    StateKind.LIST: RocksDBListState,
    StateKind.MAP: RocksDBMapState,
}


class RocksDBKeyedStateBackend(AbstractKeyedStateBackend):
    """Keyed state in RocksDB (rocksdict, raw bytes), in the directory ``path``.

    One column family per state; keys laid out as Flink lays them out (see
    :mod:`.codec`); memory bounded by ``options`` (:class:`RocksDBOptions`), within the
    budget of ``memory_of`` when given (a temporary DB opened on that backend's behalf).
    The directory belongs to this backend until :meth:`close`; use one directory per task
    attempt.
    """

    memory: RocksDBMemory
    """The block cache and write buffer manager (``memory_of``'s, when given)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        key_type: Any = None,
        max_parallelism: int = 128,
        key_group_range: KeyGroupRange | None = None,
        time_provider: Any = None,
        options: RocksDBOptions | None = None,
        *,
        memory_of: RocksDBKeyedStateBackend | None = None,
    ) -> None:
        require("rocksdict", "the RocksDB backend")
        self._key_codec = KeyCodec(check_max_parallelism(max_parallelism), 0)
        super().__init__(key_type, max_parallelism, key_group_range, time_provider)
        self._key_codec.set_range_start(self._kg_start)
        self.options = options or RocksDBOptions()
        self.memory = memory_of.memory if memory_of is not None else RocksDBMemory(self.options)
        self._dir = DbDirectory(os.fspath(path), self.options, self.memory)
        self._columns: dict[str, StateColumn] = {}
        self._sweeps: dict[str, TtlCompactionSweep] = {}
        self._snapshots: weakref.WeakSet[RocksDBStateSnapshot] = weakref.WeakSet()
        self._cf_count = 0
        self._buffer: WriteBuffer | None = None
        self._digests: dict[str, str] = {}

    @property
    def path(self) -> str:
        return self._dir.path

    def _set_key_type(self, key_type: TypeInformation) -> None:
        super()._set_key_type(key_type)
        self._key_codec.set_type(key_type)

    # -- columns -----------------------------------------------------------------------

    def _new_column(self, meta: StateMetaInfo) -> StateColumn:
        self._cf_count += 1
        d = self._dir
        col = StateColumn(d.db, f"s{self._cf_count}", meta, self._key_codec, d.cf_options, d.write_options)
        if self.change_log.recording:
            col.record_changes(self._kg_start, self._kg_count)
        if self._buffer is not None:
            col.begin_batch(self._buffer)
        return col

    @contextmanager
    def write_batch(self, max_entries: int = 1000) -> Iterator[None]:
        """Within the block, writes go to RocksDB in write batches of ``max_entries``.

        Reads still see every earlier write (a read writes out what is buffered first), so
        results are the same as without the block; blind writes (update, put, add) get
        cheaper. Nested blocks join the outer one; everything is written at the end.
        """
        self._check_open()
        if self._buffer is not None:
            yield
            return
        d = self._dir
        buffer = self._buffer = WriteBuffer(d.db, d.write_options, max_entries)
        for col in self._columns.values():
            col.begin_batch(buffer)
        try:
            yield
        finally:
            self._end_batch()

    def _end_batch(self) -> None:
        buffer, self._buffer = self._buffer, None
        for col in self._columns.values():
            col.end_batch()
        if buffer is not None and not self._closed:
            buffer.flush()

    def _column(self, meta: StateMetaInfo) -> StateColumn:
        col = self._columns.get(meta.name)
        if col is None:
            col = self._columns[meta.name] = self._new_column(meta)
        return col

    def _is_closed(self) -> bool:
        return self._closed

    def _create_internal_state(
        self,
        desc: StateDescriptor,
        meta: StateMetaInfo,
        transform: Callable[[], ColumnTransform] | None = None,
    ) -> InternalKvState:
        col = self._column(meta)
        col.meta = meta
        if transform is not None:
            col.transform_factory = transform
        self._attach_sweep(col, meta)
        if isinstance(desc, ReducingStateDescriptor):
            return RocksDBReducingState(col, self._ctx, self._is_closed, desc.reduce)
        if isinstance(desc, AggregatingStateDescriptor):
            return RocksDBAggregatingState(col, self._ctx, self._is_closed, desc.agg_function)
        return _KINDS[meta.kind](col, self._ctx, self._is_closed)

    def _attach_sweep(self, col: StateColumn, meta: StateMetaInfo) -> None:
        config = meta.ttl
        strategy = (
            None
            if config is None
            else config.cleanup_strategies.get_rocksdb_compact_filter_cleanup_strategy()
        )
        if config is None or strategy is None:
            return
        sweep = TtlCompactionSweep(
            col, config.ttl_ms, ttl_clock(self, config), strategy.query_time_after_num_entries
        )
        self._sweeps[meta.name] = sweep
        col.on_write = sweep.record_write

    def compact_expired(self, state_name: str | None = None) -> int:
        """Run the TTL compaction sweep of ``state_name`` (every such state when ``None``)
        over all its entries now, then compact; return how many entries were deleted."""
        self._check_open()
        names = list(self._sweeps) if state_name is None else [state_name]
        for name in names:
            self.state_meta(name)
        return sum(self._sweeps[n].sweep() for n in names if n in self._sweeps)

    def disk_usage(self, state_name: str) -> int:
        """Bytes of ``state_name``'s files on disk (SST files of its column family)."""
        self._check_open()
        self.state_meta(state_name)
        col = self._columns[state_name]
        return int(col.view().property_int_value("rocksdb.total-sst-files-size") or 0)

    def memory_usage(self) -> int:
        """Bytes of RocksDB memory in use: the block cache, which the memtables are charged to
        (compare with ``options.memory_budget``)."""
        self._check_open()
        return int(self._dir.db.property_int_value("rocksdb.block-cache-usage") or 0)

    def flush(self) -> None:
        """Write every memtable to disk (tests and tools; RocksDB does it by itself)."""
        self._check_open()
        for col in self._columns.values():
            col.view().flush()

    # -- restore -----------------------------------------------------------------------

    def _restore_columns(self, meta: StateMetaInfo, kgi: int, columns: StateColumns) -> None:
        col = self._columns.get(meta.name)
        if col is None:
            col = self._column(meta)
            if meta.ttl is not None:
                col.transform_factory = snapshot_transform(meta.kind, meta.ttl, ttl_clock(self, meta.ttl))
        col.stop_recording()  # restored entries are no change (recording starts at the next take)
        kg_prefix = self._key_codec.group_prefix(kgi)
        namespaces = columns.namespaces or [None] * len(columns.keys)
        check, prefix = col.namespaces.check, col.prefix
        puts: dict[bytes, bytes] = {}
        states = zip(columns.keys, namespaces, stored_states(meta, columns), strict=True)
        if col.layout.single:  # the entry of a scope is its prefix and the state
            dumps = col.values.dumps
            for key, ns, stored in states:
                check(ns)
                puts[prefix(kg_prefix, key, ns)] = dumps(stored)
        else:
            encode = col.layout.encode
            for key, ns, stored in states:
                check(ns)
                puts.update(encode(col, prefix(kg_prefix, key, ns), stored))
        col.load(puts, self.options.bulk_load_min_entries, self._dir.ingest_file)

    def _bind_restored(
        self, restored: StateMetaInfo, meta: StateMetaInfo, value: Migrate | None, user_key: Migrate | None
    ) -> None:
        old = self._columns[restored.name]
        if (restored.value_type, restored.user_key_type) == (meta.value_type, meta.user_key_type):
            return
        migrate = stored_migration(restored, value, user_key) or (lambda s: s)
        new = self._new_column(meta)
        new.stop_recording()  # migrated entries are no change: the old column's record carries over
        new.namespaces.set_type(old.namespaces.type)
        new.transform_factory = old.transform_factory
        batch: dict[bytes, bytes] = {}
        bulk_min, sst_path = self.options.bulk_load_min_entries, self._dir.ingest_file
        for prefix, entries in old.groups(old.iter_all()):  # in key order: each load is one key range
            batch.update(new.layout.encode(new, prefix, migrate(old.layout.decode(old, prefix, entries))))
            if len(batch) >= LOAD_CHUNK:
                new.load(batch, bulk_min, sst_path)
                batch = {}
        new.load(batch, bulk_min, sst_path)
        new.take_over_changes(old)
        self._columns[meta.name] = new
        self._drop(old)

    def _drop(self, col: StateColumn) -> None:
        col.close()
        self._dir.db.drop_column_family(col.cf_name)

    # -- keys, visitors, snapshots --------------------------------------------------

    def _incremental_visitor(self, state_name: str) -> StateIncrementalVisitor:
        return RocksDBIncrementalVisitor(self._columns[state_name])

    def _keys(self, state_name: str, namespace: Any) -> Iterator[Any]:
        col = self._columns[state_name]
        if namespace is not None and col.namespaces.type is None:
            return  # no typed namespace was ever used: nothing to find (and no type to adopt)
        try:
            wanted = col.namespaces.dumps(namespace)
        except SerializationError:
            return  # a namespace of another type has no state
        for prefix, _ in col.groups(col.iter_all()):
            key, pos = self._key_codec.read_key(prefix)
            if prefix[pos:] == wanted:
                yield key

    def _start_recording(self) -> None:
        for col in self._columns.values():
            col.record_changes(self._kg_start, self._kg_count)

    def _take_changes(self) -> dict[str, Changed]:
        """Each column's record, swapped for a fresh one; called right before :meth:`snapshot`
        with no write between, so the record matches the snapshot's pinned iterators."""
        start, count = self._kg_start, self._kg_count
        taken = {name: col.record_changes(start, count) for name, col in self._columns.items()}
        return {name: changed for name, changed in taken.items() if changed is not None}

    def snapshot(self) -> KeyedStateSnapshot:
        self._check_open()
        states = {}
        for name, col in self._columns.items():
            snap = RocksDBStateSnapshot(col, self.key_group_range, self._snapshots.discard)
            self._snapshots.add(snap)
            states[name] = snap
        return KeyedStateSnapshot(self._key_type, self._max_p, self.key_group_range, states)

    # -- native snapshots (see :mod:`.native`) -------------------------------------

    def native_snapshot(self) -> NativeSnapshot:
        """A snapshot as the files of a RocksDB checkpoint (its own directory, hard links)."""
        self._check_open()
        if self._buffer is not None:
            self._buffer.flush()
        directory, files = take(self._dir.db, self._dir.path, self._key_codec.width)
        names = {f.name for f in files}  # SST files compacted away are forgotten
        self._digests = {n: d for n, d in self._digests.items() if n in names}
        cols = self._columns
        metas = tuple(replace(col.meta, namespace_type=col.namespaces.type) for col in cols.values())
        return NativeSnapshot(self._key_type, self._max_p, self.key_group_range, {}, directory=directory,
                              files=files, metas=metas, columns={n: c.cf_name for n, c in cols.items()},
                              sequences={n: c.sequence for n, c in cols.items() if c.sequence},
                              digests=self._digests)  # fmt: skip

    def restore_native(
        self,
        source: str,
        metas: Iterable[StateMetaInfo],
        columns: Mapping[str, str],
        sequences: Mapping[str, int],
        held: KeyGroupRange,
        digests: Mapping[str, str] | None = None,
    ) -> None:
        """Make the DB files in ``source`` (a native snapshot's, downloaded onto this
        filesystem; moved, not copied) this backend's DB, before any state is used: each
        state of ``metas`` is bound to its column family of ``columns`` (one the files lack
        gets an empty one); list appends go on above ``sequences``. ``held``: the key groups
        the files hold; those outside this backend's range are range-deleted (Flink's
        clipping). ``digests``: SHA-256 of SST files by name, known already (not hashed again
        at the next native snapshot)."""
        self._check_open()
        if self._columns or self._metas:
            raise StateAccessError(
                "a native restore must come before any state is used", code="RESTORE_AFTER_USE"
            )
        self._dir.replace_db(source)
        self.change_log.reset()
        d = self._dir
        metas = list(metas)
        for name in columns.values():  # new column families are named after every restored one
            self._cf_count = max(self._cf_count, int(name[1:]) if name[1:].isdigit() else 0)
        for meta in sorted(metas, key=lambda m: m.name not in columns):
            cf = columns.get(meta.name)
            if cf is None:
                col = self._new_column(meta)
            else:
                col = StateColumn(d.db, cf, meta, self._key_codec, d.cf_options, d.write_options, True)
            col.stop_recording()
            if meta.ttl is not None:
                col.transform_factory = snapshot_transform(meta.kind, meta.ttl, ttl_clock(self, meta.ttl))
            col.continue_sequence(sequences.get(meta.name, 0))
            self._columns[meta.name] = col
            self._metas[meta.name] = meta
        self._digests.update(digests or {})
        own = self.key_group_range
        for start, end in ((held.start, own.start - 1), (own.end + 1, held.end)):
            if start <= end:
                begin, stop = self._key_codec.absolute[start], prefix_end(self._key_codec.absolute[end])
                for col in self._columns.values():
                    col.delete_range(begin, stop)

    def copy_key_groups(self, other: RocksDBKeyedStateBackend, key_groups: KeyGroupRange) -> None:
        """Write the entries of ``key_groups`` of ``other`` here as they are stored, none
        decoded (a rescale merging another subtask's restored files): both backends hold the
        same states of one checkpoint's operator."""
        self._check_open()
        rng = key_groups.intersection(self.key_group_range)
        if len(rng) == 0:
            return
        begin, end = self._key_codec.absolute[rng.start], prefix_end(self._key_codec.absolute[rng.end])
        bulk_min, sst_path = self.options.bulk_load_min_entries, self._dir.ingest_file
        for name, src in other._columns.items():
            dst = self._columns[name]
            dst.stop_recording()  # restored entries are no change
            dst.copy_from(src, begin, end, bulk_min, sst_path)
            dst.continue_sequence(src.sequence)

    def drop_key_groups(self, key_groups: KeyGroupRange) -> None:
        """Delete every entry of ``key_groups`` (a range delete per state)."""
        self._check_open()
        rng = key_groups.intersection(self.key_group_range)
        if len(rng) == 0:
            return
        begin = self._key_codec.absolute[rng.start]
        end = prefix_end(self._key_codec.absolute[rng.end])
        for col in self._columns.values():
            col.delete_range(begin, end)

    def close_keeping(self, target: str) -> None:
        """Close, and move the DB's files to ``target`` (a new path on this filesystem)
        instead of leaving them to be cleared: a later backend, in any process, takes them
        back with :meth:`restore_native` when they hold the state a checkpoint has."""
        db = os.path.join(self.path, DB)
        self.close()
        try:
            os.replace(db, target)
        except OSError as exc:
            raise StateAccessError(f"cannot keep the DB of {self.path} at {target}: {exc}",
                                   code="DB_CLOSE_FAILED") from exc  # fmt: skip

    def close(self) -> None:
        if self._closed:
            return
        if self._buffer is not None:
            self._buffer.flush()
            self._end_batch()
        super().close()
        for snap in list(self._snapshots):
            snap.release()
        for col in self._columns.values():
            col.close()
        self._columns.clear()
        self._sweeps.clear()
        self._states.clear()
        self._metas.clear()
        try:
            self._dir.close()
        except Exception as exc:  # rocksdict raises plain Exception
            raise StateAccessError(
                f"closing RocksDB in {self.path} failed: {exc}", code="DB_CLOSE_FAILED"
            ) from exc
