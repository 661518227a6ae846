"""Reading native RocksDB checkpoints (``rocksdb_format="native"``).

A subtask's files are downloaded into a local directory, :data:`DOWNLOADS` at a time,
each checked against its size and SHA-256 as it streams (a missing or altered one is
``[CHECKPOINT_CORRUPT]`` naming it), then opened as a DB:

- restoring a RocksDB backend, the subtask's files that overlap the backend's key groups
  most become its DB (no entry read or written), and the key groups outside its range
  are range-deleted (Flink's clipping); the entries of any other overlapping subtask (a
  rescale that merges) are copied into it as stored, none decoded;
- anything else (a heap backend, ``read_keyed``: ``show``, Python readers) opens the
  files as a temporary RocksDB backend and reads its snapshot key group by key group,
  so entries decode with the RocksDB layout's own codecs and TTL transforms.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Container, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager

import pyarrow as pa

from flinkstate.state.keyed.backend import AbstractKeyedStateBackend
from flinkstate.state.keyed.snapshot import StateMetaInfo
from flinkstate.state.keygroups.assignment import KeyGroupRange
from flinkstate.state.rocksdb.backend import RocksDBKeyedStateBackend

from ..errors import CheckpointCorruptError, CheckpointError, CheckpointNotFoundError
from ..format import keyed_schema, storage_table
from ..manifest import OperatorEntry, SubtaskEntry
from ..native_entry import NativeEntry, NativeFile
from ..storage import Storage

_CHUNK = 1 << 20
DOWNLOADS = 4
"""Files a restore downloads at a time (as Flink's RocksDB backend does with its transfer threads)."""


def download(directory: Storage, native: NativeEntry, target: str, checkpoint_id: int) -> dict[str, str]:
    """Every file of ``native`` into local directory ``target`` under its DB name, checked,
    :data:`DOWNLOADS` at a time, largest first; return the SST files' SHA-256 by name. The
    first failure stops the other downloads and is raised once none is running (``target``
    then holds partial files: the caller discards it)."""
    os.makedirs(target, exist_ok=True)
    stop = threading.Event()
    files = sorted(native.files, key=lambda f: f.ref.size, reverse=True)
    with ThreadPoolExecutor(DOWNLOADS, thread_name_prefix="native-download") as pool:
        futures = [pool.submit(_fetch, directory, f, target, checkpoint_id, stop) for f in files]
        try:
            for future in as_completed(futures):
                future.result()
        except BaseException:
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return {f.name: f.ref.sha256 for f in native.files if f.sst}


def _fetch(directory: Storage, f: NativeFile, target: str, checkpoint_id: int, stop: threading.Event) -> None:
    """File ``f`` into ``target``, checked against its size and SHA-256 (unless ``stop`` is
    set meanwhile: another download failed)."""
    ref = f.ref
    where = f"native file {ref.path} ({f.name}; referenced by checkpoint {checkpoint_id} in {directory!r})"
    sha, size = hashlib.sha256(), 0
    try:
        with directory.open_input(ref.path) as src, open(os.path.join(target, f.name), "wb") as dst:
            while chunk := src.read(_CHUNK):
                if stop.is_set():
                    return
                sha.update(chunk)
                size += len(chunk)
                dst.write(chunk)
    except (CheckpointNotFoundError, FileNotFoundError) as exc:
        raise CheckpointCorruptError(f"{where} is missing") from exc
    if size != ref.size or sha.hexdigest() != ref.sha256:
        raise CheckpointCorruptError(f"{where} does not match its size and SHA-256: truncated or altered")


def _held(entry: SubtaskEntry) -> KeyGroupRange:
    """The key groups subtask ``entry`` held."""
    assert entry.key_group_range is not None
    return KeyGroupRange(*entry.key_group_range)


def _restore_into(
    backend: RocksDBKeyedStateBackend,
    directory: Storage,
    op: OperatorEntry,
    entry: SubtaskEntry,
    checkpoint_id: int,
) -> None:
    """``entry``'s files as ``backend``'s DB, clipped to its range."""
    assert entry.native is not None
    source = os.path.join(backend.path, f"restore-{uuid.uuid4().hex}")
    try:
        digests = download(directory, entry.native, source, checkpoint_id)
        native = entry.native
        backend.restore_native(source, op.keyed_states, native.columns, native.sequences,
                               _held(entry), digests)  # fmt: skip
    finally:
        shutil.rmtree(source, ignore_errors=True)


def reopen_native(backend: RocksDBKeyedStateBackend, op: OperatorEntry, index: int, source: str) -> None:
    """Make local directory ``source`` (moved, not copied) ``backend``'s DB: the DB that
    wrote subtask ``index`` of ``op`` natively, kept on this machine since and holding
    exactly that subtask's state (the caller knows it does, for instance by the attempt that
    wrote both). Nothing is downloaded; the files' digests are the manifest's."""
    entry = next((st for st in op.subtasks if st.index == index and st.native is not None), None)
    if entry is None or entry.native is None or _held(entry) != backend.key_group_range:
        raise CheckpointError(
            f"operator {op.uid!r} has no native subtask {index} of key groups {backend.key_group_range}",
            code="INVALID_ARGUMENT",
        )
    native = entry.native
    digests = {f.name: f.ref.sha256 for f in native.files if f.sst}
    backend.restore_native(source, op.keyed_states, native.columns, native.sequences, _held(entry), digests)


@contextmanager
def opened(directory: Storage, op: OperatorEntry, entry: SubtaskEntry, checkpoint_id: int,
           like: AbstractKeyedStateBackend | None = None) -> Iterator[RocksDBKeyedStateBackend]:  # fmt: skip
    """``entry``'s files opened as a temporary RocksDB backend (deleted afterwards); its
    TTL clock and watermark are ``like``'s, when given, and when ``like`` is a RocksDB
    backend, its options and its memory (one block cache for both)."""
    rocks = like if isinstance(like, RocksDBKeyedStateBackend) else None
    # beside a RocksDB backend's DB, as its own native work (a killed process's is cleared)
    work = tempfile.mkdtemp(prefix="flinkstate-native-" if rocks is None else "native-",
                            dir=None if rocks is None else rocks.path)  # fmt: skip
    try:
        clock = like.time_provider if like else None
        options = rocks.options if rocks is not None else None
        tmp = RocksDBKeyedStateBackend(os.path.join(work, "db"), op.key_type, op.max_parallelism,
                                       _held(entry), clock, options, memory_of=rocks)  # fmt: skip
        try:
            if like is not None:
                tmp.advance_watermark(like.current_watermark)
            _restore_into(tmp, directory, op, entry, checkpoint_id)
            yield tmp
        finally:
            tmp.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _overlap(entry: SubtaskEntry, wanted: KeyGroupRange) -> int:
    rng = entry.key_group_range
    return 0 if rng is None else max(0, min(rng[1], wanted.end) - max(rng[0], wanted.start) + 1)


def restore_native(backend: AbstractKeyedStateBackend, directory: Storage, op: OperatorEntry,
                   checkpoint_id: int) -> None:  # fmt: skip
    """Load ``op``'s native subtasks into ``backend`` (module docstring)."""
    wanted = backend.key_group_range
    sources = sorted((st for st in op.subtasks if st.native is not None and _overlap(st, wanted)),
                     key=lambda st: -_overlap(st, wanted))  # fmt: skip
    if sources and isinstance(backend, RocksDBKeyedStateBackend):
        _restore_into(backend, directory, op, sources[0], checkpoint_id)
        for entry in sources[1:]:
            with opened(directory, op, entry, checkpoint_id, backend) as tmp:
                backend.copy_key_groups(tmp, _held(entry))
        return
    for entry in sources:
        overlap = _held(entry).intersection(wanted)
        with opened(directory, op, entry, checkpoint_id, backend) as tmp, tmp.snapshot() as snap:
            for meta in op.keyed_states:
                for kg in overlap:
                    cols = snap.states[meta.name].columns(kg)
                    if len(cols):
                        backend.restore_state(meta, kg, cols)


def refuse_native(op: OperatorEntry | None, what: str, checkpoint_id: int | None = None) -> None:
    """An error when ``op`` (of checkpoint ``checkpoint_id``) is held as native RocksDB files,
    which ``what`` does not handle (it works on Parquet files)."""
    if op is not None and any(st.native is not None for st in op.subtasks):
        of = "" if checkpoint_id is None else f" of checkpoint {checkpoint_id}"
        raise CheckpointError(
            f"operator {op.uid!r}{of} is a native RocksDB checkpoint "
            f"(rocksdb_format='native'); {what} needs the Parquet format: restore it and checkpoint "
            "it with rocksdb_format='parquet' (or write a savepoint, always Parquet)",
            code="NATIVE_FORMAT_UNSUPPORTED",
        )


def native_key_groups(
    directory: Storage,
    op: OperatorEntry,
    meta: StateMetaInfo,
    checkpoint_id: int,
    key_groups: Container[int] | None = None,
    subtasks: Container[int] | None = None,
) -> Iterator[tuple[int, list[pa.Table]]]:
    """(key group, [its table in the Parquet storage layout]) of state ``meta`` in ``op``'s
    native subtasks (``subtasks``: only those indexes), optionally limited to ``key_groups``:
    what :func:`.keyed_files.read_key_groups` yields for Parquet files. A TTL state with
    full-snapshot cleanup leaves out what has expired when read (a Parquet checkpoint: when
    written)."""
    assert op.key_type is not None
    schema = keyed_schema(meta, op.key_type)
    for entry in op.subtasks:
        if entry.native is None or meta.name not in entry.native.columns:
            continue
        if subtasks is not None and entry.index not in subtasks:
            continue
        rng = _held(entry)
        groups = [kg for kg in rng if key_groups is None or kg in key_groups]
        if not groups:
            continue
        with opened(directory, op, entry, checkpoint_id) as tmp, tmp.snapshot() as snap:
            state = snap.states[meta.name]
            for kg in groups:
                cols = state.columns(kg)
                if len(cols):
                    yield kg, [storage_table(meta, op.key_type, kg, cols, schema)]
