"""Native snapshots of the RocksDB backend: a RocksDB checkpoint of the live DB, by files.

Taking one (the synchronous part) is a RocksDB checkpoint into a fresh directory beside
the DB: memtables flushed, then every live file hard-linked (SST files are immutable, so
the links stay consistent while the DB goes on writing and compacting). The directory is
the snapshot's own, never the DB's working files: the checkpoint layer copies its files
out, then :meth:`NativeSnapshot.release` deletes it. Each SST file is described by the
column families it belongs to and the key groups its keys span (the first bytes of a key
are its key group, see :mod:`.codec`).

Restoring (:func:`reopen`) is the other way: the files of one snapshot, downloaded into a
directory, become the backend's DB; its states are bound to their column families by
name, with no entry read or written.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import StateAccessError
from ..keyed.snapshot import KeyedStateSnapshot, StateMetaInfo
from .directory import TRANSIENT

_SST_LINE = re.compile(r"^\s*(\d+):\d+\[", re.MULTILINE)
_CHUNK = 1 << 20

Signature = tuple[int, int, int, int]
"""A local file's device, inode, size and modification time (ns)."""


def signature(path: str) -> Signature:
    """``path``'s :data:`Signature`. Not its change time: the DB compacting away its own
    link to a file a snapshot holds changes that, not the file."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class LocalFile:
    """One file of a native snapshot: its name in the DB directory and what it holds.

    ``column_families`` and ``key_groups`` (first, last) only for SST files (``sst``)."""

    name: str
    size: int
    sst: bool
    column_families: tuple[str, ...] = ()
    key_groups: tuple[int, int] | None = None
    entries: int = 0


@dataclass(slots=True)
class NativeSnapshot(KeyedStateSnapshot):
    """A keyed snapshot as the files of a RocksDB checkpoint in ``directory``.

    ``metas``: every state's description; ``columns``: the column family of each state;
    ``sequences``: each list state's last element sequence (appends after a restore go
    on above it); ``digests``: SHA-256 of SST files by name, shared with the backend (an
    SST file never changes, so each is hashed once per DB); ``hashed``: the files this
    snapshot hashed itself, with their :func:`signature` unchanged while it read them."""

    directory: str = ""
    files: tuple[LocalFile, ...] = ()
    metas: tuple[StateMetaInfo, ...] = ()
    columns: Mapping[str, str] = field(default_factory=dict)
    sequences: Mapping[str, int] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    hashed: dict[str, Signature] = field(default_factory=dict)

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def digest(self, name: str) -> str:
        """The SHA-256 of SST file ``name`` (computed once per DB, then remembered)."""
        known = self.digests.get(name)
        if known is None:
            path = self.path(name)
            before = signature(path)
            sha = hashlib.sha256()
            with open(path, "rb") as f:
                while chunk := f.read(_CHUNK):
                    sha.update(chunk)
            known = self.digests[name] = sha.hexdigest()
            if signature(path) == before:
                self.hashed[name] = before
        return known

    def unchanged(self, name: str) -> bool:
        """Whether file ``name`` is, by its :func:`signature`, the one this snapshot hashed
        (so its bytes are the ones its digest was taken of, without hashing them again)."""
        hashed = self.hashed.get(name)
        return hashed is not None and signature(self.path(name)) == hashed

    def release(self) -> None:
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = ""


def take(db: Any, work_dir: str, key_group_width: int) -> tuple[str, tuple[LocalFile, ...]]:
    """A RocksDB checkpoint of ``db`` in a new directory under ``work_dir``, and its files."""
    import rocksdict

    target = os.path.join(work_dir, f"{TRANSIENT[0]}{uuid.uuid4().hex}")
    try:
        rocksdict.Checkpoint(db).create_checkpoint(target)
        return target, _described(db, target, key_group_width)
    except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
        shutil.rmtree(target, ignore_errors=True)
        raise StateAccessError(
            f"RocksDB checkpoint into {target} failed: {exc}", code="DB_CHECKPOINT_FAILED"
        ) from exc


def _described(db: Any, directory: str, width: int) -> tuple[LocalFile, ...]:
    """The files of checkpoint ``directory`` of ``db``, described from the live DB's file
    metadata (an SST file's number names one immutable file for the DB's life); from the
    checkpoint itself when the DB has compacted one of them away since (:func:`_describe`)."""
    import rocksdict

    names = rocksdict.Rdict.list_cf(directory)  # the checkpoint's own (static) listing
    handles = [db.get_column_family(name) for name in names]
    try:
        described, unknown = _files(directory, db, zip(names, handles, strict=True), width)
    finally:
        for cf in handles:
            cf.close()
    return _describe(directory, width) if unknown else described


def _describe(directory: str, width: int) -> tuple[LocalFile, ...]:
    """The files of checkpoint ``directory``: SST files with their column families (read
    from the checkpoint itself, opened read-only)."""
    import rocksdict

    opts = rocksdict.Options(raw_mode=True)
    db = rocksdict.Rdict(directory, opts, access_type=rocksdict.AccessType.read_only())
    handles: list[Any] = []
    try:
        names = rocksdict.Rdict.list_cf(directory)
        handles = [db.get_column_family(name) for name in names]
        described, unknown = _files(directory, db, zip(names, handles, strict=True), width)
    finally:
        for cf in handles:
            cf.close()
        db.close()
    if unknown:
        raise StateAccessError(
            f"RocksDB checkpoint {directory} does not list its own SST files {unknown}",
            code="DB_CHECKPOINT_FAILED",
        )
    return described


def _files(
    directory: str, db: Any, families: Iterable[tuple[str, Any]], width: int
) -> tuple[tuple[LocalFile, ...], list[str]]:
    """(the files in ``directory`` described by ``db``'s file metadata and its column
    ``families``' SST listings (name, handle), the SST files those do not describe)."""
    by_number: dict[int, list[str]] = {}
    for cf_name, cf in families:
        for number in _SST_LINE.findall(cf.property_value("rocksdb.sstables") or ""):
            by_number.setdefault(int(number), []).append(cf_name)
    known = {os.path.basename(f["name"]): f for f in db.live_files()}
    out: list[LocalFile] = []
    unknown: list[str] = []
    for name in sorted(os.listdir(directory)):
        size = os.path.getsize(os.path.join(directory, name))
        if not name.endswith(".sst"):
            out.append(LocalFile(name, size, False))
            continue
        info, cfs = known.get(name), tuple(sorted(by_number.get(int(name[:-4]), [])))
        if info is None or not cfs:
            unknown.append(name)
            continue
        first = int.from_bytes(info["start_key"][:width], "big")
        last = int.from_bytes(info["end_key"][:width], "big")
        out.append(LocalFile(name, size, True, cfs, (first, last), int(info["num_entries"])))
    return tuple(out), unknown
