"""Writing a native RocksDB snapshot: its SST files once into the root's shared area.

An SST file is stored by content, as ``_data/native/<SHA-256>.sst`` under the checkpoint
root: two DBs (or one DB before and after a restore) never collide, and a file the
latest completed checkpoint of the operator already references is not uploaded again
(its reference, with the checkpoint that uploaded it, is reused). The other files of the
RocksDB checkpoint (its MANIFEST, CURRENT, OPTIONS: small, rewritten every time) go
into the checkpoint's own directory. Nothing refers to the live DB's working files: the
snapshot's own hard-linked copy is read (see :mod:`flinkstate.state.rocksdb.native`).

A file already in the shared area (with its size) is never written again, even one no
manifest at hand references (a job restored from an older checkpoint): a crash while
rewriting it would damage the checkpoints that reference it. SST files are never
deleted by an aborted attempt (another checkpoint may reference the
same content); retention removes them once no retained checkpoint does, and orphans
(an attempt that never committed) once past the grace period (see :mod:`.versions`).

Each byte is hashed once: a file the snapshot has just hashed is copied without hashing it
again when its signature (inode, size, modification time) is the same before and after the
copy; a file whose digest was remembered from elsewhere is hashed as it is copied. (A
rewrite that keeps a file's size and resets its modification time escapes this check, not
the restore's: it verifies every file's digest, ``[CHECKPOINT_CORRUPT]``.) A copy not of
the digest's bytes is deleted, the one SST file an attempt removes (no checkpoint can
rightly reference those bytes under that name), and the attempt fails (``[WRITE_FAILED]``).
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import replace
from typing import Any

from flinkstate.state.rocksdb.native import LocalFile, NativeSnapshot

from ..errors import CheckpointError, CheckpointNotFoundError
from ..fileref import FileRef
from ..manifest import Manifest
from ..native_entry import NativeEntry, NativeFile
from ..storage import Storage
from .versions import DATA_DIR, completed_ids, load_version

NATIVE_DIR = f"{DATA_DIR}/native"
_CHUNK = 1 << 20


def known_files(root: Storage, uid: str) -> dict[str, FileRef]:
    """SST files the latest completed checkpoint's operator ``uid`` references, by SHA-256
    (paths root-relative); none when there is no such checkpoint or it cannot be read."""
    ids = completed_ids(root)
    if not ids:
        return {}
    try:
        manifest: Manifest = load_version(root, ids[-1])
    except CheckpointError:
        return {}
    op = manifest.operator(uid)
    out: dict[str, FileRef] = {}
    for st in () if op is None else op.subtasks:
        for f in () if st.native is None else st.native.files:
            if f.sst:
                path = posixpath.normpath(posixpath.join(f"chk-{ids[-1]}", f.ref.path))
                out[f.ref.sha256] = FileRef(path, f.ref.size, f.ref.sha256, f.ref.rows,
                                            checkpoint_id=f.ref.checkpoint_id)  # fmt: skip
    return out


def _copy(storage: Storage, path: str, local: str, sha: Any = None) -> None:
    """Copy local file ``local`` to ``path`` of ``storage``, feeding its bytes to ``sha``."""
    with open(local, "rb") as src, storage.open_output(path) as dst:
        while chunk := src.read(_CHUNK):
            if sha is not None:
                sha.update(chunk)
            dst.write(chunk)


def _upload(storage: Storage, path: str, local: str) -> str:
    """Copy local file ``local`` to ``path`` of ``storage``; return its SHA-256."""
    sha = hashlib.sha256()
    _copy(storage, path, local, sha)
    return sha.hexdigest()


class NativeWriter:
    """Stores one subtask's native snapshot for checkpoint ``checkpoint_id`` (directory
    ``chk-<id>`` of ``root``); ``prefix`` makes its per-checkpoint file names unique."""

    def __init__(self, root: Storage, checkpoint_id: int, prefix: str, uid: str) -> None:
        self.root = root
        self.checkpoint_id = checkpoint_id
        self.directory = root.child(f"chk-{checkpoint_id}")
        self.prefix = prefix
        self.uid = uid
        self.written: list[str] = []
        """Per-checkpoint files written (relative to the checkpoint directory), for abort."""
        self.uploaded_bytes = 0

    def write(self, snapshot: NativeSnapshot) -> NativeEntry:
        known = known_files(self.root, self.uid)
        files = [self._sst(snapshot, f, known) if f.sst else self._other(snapshot, f) for f in snapshot.files]
        return NativeEntry(tuple(files), dict(snapshot.columns), dict(snapshot.sequences))

    def _sst(self, snapshot: NativeSnapshot, local: LocalFile, known: dict[str, FileRef]) -> NativeFile:
        digest = snapshot.digest(local.name)
        ref = known.get(digest)
        path = f"{NATIVE_DIR}/{digest}.sst"
        if (ref is None or ref.size != local.size) and self._stored(path, local.size):
            ref = FileRef(path, local.size, digest, local.entries)  # stored by a checkpoint not at hand
        if ref is None or ref.size != local.size:
            self._store(snapshot, local.name, path, digest)
            self.uploaded_bytes += local.size
            ref = FileRef(path, local.size, digest, local.entries, checkpoint_id=self.checkpoint_id)
        seen = posixpath.relpath(ref.path, f"chk-{self.checkpoint_id}")
        return NativeFile(local.name, replace(ref, path=seen), local.column_families, local.key_groups)

    def _store(self, snapshot: NativeSnapshot, name: str, path: str, digest: str) -> None:
        """Upload SST file ``name`` to ``path`` (named by its ``digest``). A file the snapshot
        hashed itself and whose signature has not changed since (:meth:`NativeSnapshot.unchanged`,
        before and after the copy) is copied without hashing it again; any other is hashed as
        it is copied. A copy that is not of the digest's bytes is deleted, never left under it."""
        local = snapshot.path(name)
        if snapshot.unchanged(name):
            _copy(self.root, path, local)
            intact = snapshot.unchanged(name)
        else:
            intact = _upload(self.root, path, local) == digest
        if not intact:
            message = f"SST file {name} changed while it was uploaded"
            try:
                self.root.delete(path)
            except (OSError, CheckpointError) as exc:
                left = f"{message}; its copy {path} is left: {exc}"
                raise CheckpointError(left, code="WRITE_FAILED") from exc
            raise CheckpointError(message, code="WRITE_FAILED")

    def _stored(self, path: str, size: int) -> bool:
        """Whether the shared area holds ``path`` whole already (a file of that name has that
        content; one a crash cut short has fewer bytes). It is never written again: an older
        retained checkpoint may reference it (a job restored from it)."""
        try:
            return self.root.size(path) == size
        except (FileNotFoundError, CheckpointNotFoundError):
            return False

    def _other(self, snapshot: NativeSnapshot, local: LocalFile) -> NativeFile:
        name = f"{self.prefix}-native-{local.name}"
        self.written.append(name)
        digest = _upload(self.directory, name, snapshot.path(local.name))
        self.uploaded_bytes += local.size
        return NativeFile(local.name, FileRef(name, local.size, digest, 0, checkpoint_id=self.checkpoint_id))
