"""One state's column family: its codecs, its layout, and the only ways to write it.

Every write of the backend goes through :meth:`StateColumn.put`, :meth:`StateColumn.delete`,
:meth:`StateColumn.write` (one atomic batch of puts and deletes),
:meth:`StateColumn.load` (restored entries, bulk-loaded when many) or
:meth:`StateColumn.delete_range`; change recording (incremental checkpoints) hooks there.
Inside the backend's ``write_batch()`` these writes go into a shared :class:`WriteBuffer`
instead, and every read path (:meth:`StateColumn.view`) writes the buffer out first, so
reads always see every earlier write.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from ..descriptors import StateKind
from ..keyed.snapshot import ColumnTransform, StateMetaInfo, plain_columns
from . import bulk
from .changes import FOLD_AT, ColumnChanges, fold, range_scopes
from .codec import KeyCodec, NamespaceCodec, ValueCodec, value_dumps
from .layout import Entries, Layout, layout_for

if TYPE_CHECKING:
    import rocksdict

_SEQ = struct.Struct(">Q")
_WRITE_BATCH = 4096
LOAD_CHUNK = 1 << 17
"""Entries a migration or a copy without files holds at a time for :meth:`StateColumn.load`."""


class WriteBuffer:
    """One RocksDB WriteBatch shared by a backend's columns, written every ``limit`` entries."""

    def __init__(self, db: rocksdict.Rdict, write_options: rocksdict.WriteOptions, limit: int) -> None:
        import rocksdict

        self._db = db
        self._write_options = write_options
        self.limit = limit
        self._new = rocksdict.WriteBatch
        self.batch = self._new(raw_mode=True)
        self.count = 0

    def put(self, key: bytes, value: bytes, handle: Any) -> None:
        self.batch.put(key, value, handle)
        self.count += 1
        if self.count >= self.limit:
            self.flush()

    def delete(self, key: bytes, handle: Any) -> None:
        self.batch.delete(key, handle)
        self.count += 1
        if self.count >= self.limit:
            self.flush()

    def flush(self) -> None:
        if self.count:
            self._db.write(self.batch, self._write_options)  # consumes the batch
            self.batch = self._new(raw_mode=True)
            self.count = 0


class StateColumn:
    """The column family ``cf_name`` holding state ``meta.name``."""

    def __init__(
        self,
        db: rocksdict.Rdict,
        cf_name: str,
        meta: StateMetaInfo,
        keys: KeyCodec,
        cf_options: rocksdict.Options,
        write_options: rocksdict.WriteOptions,
        existing: bool = False,
    ) -> None:
        """``existing``: the column family is in the DB already (a native restore)."""
        import rocksdict

        self.meta = meta
        self.cf_name = cf_name
        # raw mode: bytes in, bytes out
        self.cf: Any = (
            db.get_column_family(cf_name) if existing else db.create_column_family(cf_name, cf_options)
        )
        self.cf.set_write_options(write_options)
        self.handle: rocksdict.ColumnFamily | None = db.get_column_family_handle(cf_name)
        self._db = db
        self._cf_options = cf_options
        self._batch = rocksdict.WriteBatch
        self._write_options = write_options
        self.keys = keys
        self.namespaces = NamespaceCodec(meta.name)
        self.namespaces.set_type(meta.namespace_type)
        ttl = meta.ttl is not None
        self.values = ValueCodec(meta.value_type, ttl, nullable=meta.kind is StateKind.MAP)
        self.user_keys: ValueCodec | None = None
        self.user_key_dumps: Callable[[Any], bytes] | None = None
        if meta.kind is StateKind.MAP:
            assert meta.user_key_type is not None
            self.user_keys = ValueCodec(meta.user_key_type, False, key=True)
            self.user_key_dumps = value_dumps(meta.user_key_type)
        self.layout: Layout = layout_for(meta.kind)
        self.transform_factory: Callable[[], ColumnTransform] = lambda: plain_columns
        self.on_write: Callable[[], None] | None = None
        self.buffer: WriteBuffer | None = None
        self.readers: list[Callable[[Callable[[bytes], Any]], None]] = []
        self._seq = 0
        self.changed: list[bytes] | None = None
        """When recording changes: the keys written since the last take (see :mod:`.changes`)."""
        self._scopes: set[bytes] = set()
        self._fold_at = FOLD_AT
        self._prefix_len = partial(self.layout.prefix_len, self)
        self._scopes_of = partial(self.layout.scopes, self)

    # -- change recording -----------------------------------------------------------

    def record_changes(self, kg_start: int, kg_count: int) -> ColumnChanges | None:
        """Start a new epoch of recording; return the epoch that ends (``None``: was not recording)."""
        raw, scopes = self.changed, self._scopes
        self.changed, self._scopes, self._fold_at = [], set(), FOLD_AT
        if raw is None:
            return None
        return ColumnChanges(raw, scopes, self._scopes_of, self.keys.width, kg_start, kg_count)

    def stop_recording(self) -> None:
        self.changed, self._scopes, self._fold_at = None, set(), FOLD_AT

    def take_over_changes(self, old: StateColumn) -> None:
        """Continue ``old``'s epoch (this column replaces it, with the same scopes)."""
        self.changed, self._scopes, self._fold_at = old.changed, old._scopes, old._fold_at
        old.stop_recording()

    # -- writes: the funnel -------------------------------------------------------

    def put(self, key: bytes, value: bytes) -> None:
        buffer = self.buffer
        if buffer is None:
            self.cf.put(key, value)
        else:  # WriteBuffer.put, inlined: this is the per-record path of write_batch()
            buffer.batch.put(key, value, self.handle)
            buffer.count += 1
            if buffer.count >= buffer.limit:
                buffer.flush()
        changed = self.changed
        if changed is not None:
            changed.append(key)
            if len(changed) > self._fold_at:
                self._fold_at = fold(changed, self._scopes, self._scopes_of)
        if self.on_write is not None:
            self.on_write()

    def delete(self, key: bytes) -> None:
        if self.buffer is None:
            self.cf.delete(key)
        else:
            self.buffer.delete(key, self.handle)
        changed = self.changed
        if changed is not None:
            changed.append(key)
            if len(changed) > self._fold_at:
                self._fold_at = fold(changed, self._scopes, self._scopes_of)

    def write(self, puts: Sequence[tuple[bytes, bytes]], deletes: Sequence[bytes] = ()) -> None:
        """Apply deletes, then puts, atomically (in order, within a write_batch block)."""
        changed = self.changed
        if changed is not None:
            changed.extend(deletes)
            changed.extend([key for key, _ in puts])
            if len(changed) > self._fold_at:
                self._fold_at = fold(changed, self._scopes, self._scopes_of)
        buffer = self.buffer
        if buffer is not None:
            for key in deletes:
                buffer.delete(key, self.handle)
            for key, value in puts:
                buffer.put(key, value, self.handle)
            if self.on_write is not None:
                self.on_write()
            return
        batch = self._batch(raw_mode=True)
        handle = self.handle
        for key in deletes:
            batch.delete(key, handle)
        for key, value in puts:
            batch.put(key, value, handle)
        if len(batch):
            self._db.write(batch, self._write_options)
            if self.on_write is not None:
                self.on_write()

    def load(self, puts: dict[bytes, bytes], bulk_min: int, sst_path: Callable[[], str]) -> None:
        """Put restored ``puts``: from ``bulk_min`` entries on as one sorted SST file at
        ``sst_path()``, ingested (see :mod:`.bulk`), below that in write batches. Not atomic;
        restored entries are no change, so the column is not recording."""
        assert self.changed is None, "a load is a restore: stop recording first"
        if len(puts) < bulk_min:
            items = list(puts.items())
            for start in range(0, len(items), _WRITE_BATCH):
                self.write(items[start : start + _WRITE_BATCH])
            return
        bulk.ingest(self.view(), self._cf_options, sst_path, puts)
        if self.on_write is not None:
            self.on_write()

    def copy_from(self, source: StateColumn, begin: bytes, end: bytes, bulk_min: int,
                  sst_path: Callable[[], str]) -> None:  # fmt: skip
        """Put ``source``'s entries with keys in ``[begin, end)`` here as they are stored (none
        decoded), streamed from its iterator into SST files (:func:`.bulk.ingest_sorted`);
        fewer than ``bulk_min`` go in write batches, read :data:`LOAD_CHUNK` at a time when
        ``bulk_min`` is larger (files off). A restore, as :meth:`load` is."""
        assert self.changed is None, "a copy is a restore: stop recording first"
        entries = iter(bulk.stored_between(source.view(), begin, end))
        at_a_time = min(bulk_min, LOAD_CHUNK)
        try:
            while len(head := dict(islice(entries, at_a_time))) < bulk_min:
                self.load(head, bulk_min, sst_path)  # write batches
                if len(head) < at_a_time:
                    return
            bulk.ingest_sorted(self.view(), self._cf_options, sst_path, chain(head.items(), entries))
        finally:
            del entries  # no RocksDB iterator outlives the copy (it would keep the source DB open)
        if self.on_write is not None:
            self.on_write()

    def delete_range(self, begin: bytes, end: bytes) -> None:
        """Delete every key in ``[begin, end)`` (dropping key groups, never per record)."""
        if self.changed is not None:
            self._scopes |= range_scopes(self.iter_all(begin), end, self._prefix_len)
        self.view().delete_range(begin, end)

    def begin_batch(self, buffer: WriteBuffer) -> None:
        self.buffer = buffer
        for bind in self.readers:
            bind(self.get)

    def end_batch(self) -> None:
        self.buffer = None
        for bind in self.readers:
            bind(self.cf.get)

    # -- reads ----------------------------------------------------------------------

    def view(self) -> Any:
        """The column family to read (buffered writes are written out first)."""
        if self.buffer is not None:
            self.buffer.flush()
        return self.cf

    def get(self, key: bytes) -> bytes | None:
        data: bytes | None = self.view().get(key)
        return data

    def scan(self, prefix: bytes) -> Entries:
        """Every entry whose key starts with ``prefix``, in key order."""
        out: Entries = []
        for key, value in self.view().items(from_key=prefix):
            if not key.startswith(prefix):
                break
            out.append((key, value))
        return out

    def iter_all(self, start: bytes = b"", chunk: int = 1024) -> Iterator[tuple[bytes, bytes]]:
        """Every entry from ``start`` on, read in chunks: no RocksDB iterator stays open
        between yields, so an abandoned walk never keeps the DB from closing."""
        while True:
            entries = list(islice(self.view().items(from_key=start), chunk))
            yield from entries
            if len(entries) < chunk:
                return
            start = entries[-1][0] + b"\x00"

    def has_prefix(self, prefix: bytes) -> bool:
        for key in self.view().keys(from_key=prefix):
            return bool(key.startswith(prefix))
        return False

    @property
    def sequence(self) -> int:
        """The last list element sequence handed out."""
        return self._seq

    def continue_sequence(self, last: int) -> None:
        """Hand out sequences above ``last`` (a restored column's last)."""
        self._seq = max(self._seq, last)

    def next_seq(self) -> bytes:
        """A list element's suffix: increasing, so appends keep their order."""
        self._seq += 1
        return _SEQ.pack(self._seq)

    # -- groups of entries ------------------------------------------------------------

    def prefix(self, kg_prefix: bytes, key: Any, namespace: Any) -> bytes:
        return kg_prefix + self.keys.dumps(key) + self.namespaces.dumps(namespace)

    def groups(self, entries: Iterable[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, Entries]]:
        """Consecutive entries grouped by their (key group, key, namespace) prefix."""
        current: bytes | None = None
        bucket: Entries = []
        prefix_len = self.layout.prefix_len
        for key, value in entries:
            if current is not None and key.startswith(current):
                bucket.append((key, value))
                continue
            if current is not None:
                yield current, bucket
            current = key[: prefix_len(self, key)]
            bucket = [(key, value)]
        if current is not None:
            yield current, bucket

    def split_prefix(self, prefix: bytes) -> tuple[Any, Any]:
        """(key, namespace) of a group prefix."""
        key, pos = self.keys.read_key(prefix)
        namespace, _ = self.namespaces.read(prefix, pos)
        return key, namespace

    def close(self) -> None:
        self.stop_recording()
        self.on_write = None
        self.buffer = None
        self.readers.clear()
        self.handle = None
        self.cf.close()
