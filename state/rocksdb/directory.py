"""The working directory of one RocksDB backend: ownership, locking and opening.

A directory belongs to one open backend. Ownership is an exclusive ``flock`` on a lock
file (the OS drops it when a process dies, so a directory left by a killed process opens
again) plus a registry of the directories open in this process (a second open from the
same process is refused too). A marker file says the directory is ours: a non-empty
directory without it is refused rather than overwritten. The directory is working
space, like Flink's local RocksDB directory: what an earlier backend left there is
discarded on open; durable state comes back from checkpoints. SST files built for
ingestion (bulk-loaded restores) are written to ``<path>/ingest`` first, then moved in.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import shutil
import threading
from typing import IO, Any

from ..errors import InvalidArgumentError, StateAccessError
from ..memory import trim_heap
from .options import RocksDBMemory, RocksDBOptions

MARKER = "FLINKSTATE_ROCKSDB"
MARKER_TEXT = "flinkstate RocksDB keyed state backend, layout version 1\n"
LOCK = "flinkstate.lock"
DB = "db"
INGEST = "ingest"
TRANSIENT = ("native-", "restore-")
"""Name prefixes of directories a native snapshot or restore makes beside the DB, for a while."""

_OPEN: set[str] = set()
_OPEN_GUARD = threading.Lock()


class DbDirectory:
    """An owned, locked directory with an open RocksDB in ``<path>/db``."""

    def __init__(self, path: str, options: RocksDBOptions, memory: RocksDBMemory) -> None:
        self.path = os.path.abspath(os.fspath(path))
        with _OPEN_GUARD:
            if self.path in _OPEN:
                raise StateAccessError(
                    f"the RocksDB directory {self.path} is already open in this process",
                    code="DB_DIRECTORY_IN_USE",
                )
            _OPEN.add(self.path)
        self._lock: IO[str] | None = None
        self._files = itertools.count()
        try:
            self._claim()
            self.db_options, self.cf_options = options.build(memory)
            self.write_options = options.write_options()
            self.db = self._open_db()
        except BaseException:
            self._release()
            raise

    def _claim(self) -> None:
        path = self.path
        try:
            os.makedirs(path, exist_ok=True)
            entries = set(os.listdir(path))
        except OSError as exc:
            raise InvalidArgumentError(
                f"cannot use {path} as a RocksDB directory: {exc}", code="INVALID_DB_DIRECTORY"
            ) from exc
        if entries - {LOCK} and MARKER not in entries:
            raise InvalidArgumentError(
                f"{path} is not empty and is not a flinkstate RocksDB directory ({sorted(entries)[:5]}); "
                "refusing to overwrite it",
                code="FOREIGN_DB_DIRECTORY",
            )
        self._lock = open(os.path.join(path, LOCK), "a+")  # noqa: SIM115 (held until close)
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            raise StateAccessError(
                f"the RocksDB directory {path} is in use by another process", code="DB_DIRECTORY_IN_USE"
            ) from exc
        marker = os.path.join(path, MARKER)
        if MARKER in entries:
            try:
                with open(marker, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError) as exc:
                raise InvalidArgumentError(
                    f"{marker} is unreadable: {exc}", code="CORRUPT_DB_DIRECTORY"
                ) from exc
            if text != MARKER_TEXT:
                raise InvalidArgumentError(
                    f"{marker} does not describe a directory of this backend: {text[:80]!r}",
                    code="CORRUPT_DB_DIRECTORY",
                )
        else:
            with open(marker, "w", encoding="utf-8") as f:
                f.write(MARKER_TEXT)
        try:
            for name in entries:  # what a killed process left of native snapshots and restores
                if name.startswith(TRANSIENT):
                    shutil.rmtree(os.path.join(path, name), ignore_errors=True)
            for name in (DB, INGEST):
                work = os.path.join(path, name)
                if os.path.isdir(work) and not os.path.islink(work):
                    shutil.rmtree(work)
                elif os.path.lexists(work):
                    os.remove(work)
        except OSError as exc:
            raise InvalidArgumentError(
                f"cannot clear the working state in {path}: {exc}", code="CORRUPT_DB_DIRECTORY"
            ) from exc

    def _open_db(self) -> Any:
        import rocksdict

        try:
            return rocksdict.Rdict(os.path.join(self.path, DB), self.db_options)
        except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
            raise StateAccessError(
                f"cannot open RocksDB in {self.path}: {exc}", code="DB_OPEN_FAILED"
            ) from exc

    def ingest_file(self) -> str:
        """A new path for an SST file to be ingested (its folder is created on first use)."""
        folder = os.path.join(self.path, INGEST)
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, f"{next(self._files)}.sst")

    def replace_db(self, source: str) -> None:
        """Make the DB files in ``source`` (a directory on this filesystem: a restore's
        downloads) this directory's DB, and open it with its column families. The DB open
        now must have no column family or iterator open."""
        db_path = os.path.join(self.path, DB)
        self.db.close()
        shutil.rmtree(db_path, ignore_errors=True)
        os.replace(source, db_path)
        self.db = open_existing(db_path, self.db_options, self.cf_options)

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.close()  # closing the file drops the flock
            self._lock = None
        with _OPEN_GUARD:
            _OPEN.discard(self.path)

    def close(self) -> None:
        """Close the DB (every column family and iterator must be closed first), unlock, and
        give the memory it freed back to the OS (see :func:`trim_heap`)."""
        try:
            self.db.close()
        finally:
            self._release()
            trim_heap()


def open_existing(path: str, db_options: Any, cf_options: Any) -> Any:
    """The DB in ``path`` (restored files) with every column family it has."""
    import rocksdict

    names = [n for n in rocksdict.Rdict.list_cf(path) if n != "default"]
    try:
        return rocksdict.Rdict(path, db_options, column_families={n: cf_options for n in names})
    except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
        raise StateAccessError(
            f"cannot open restored RocksDB in {path}: {exc}", code="DB_OPEN_FAILED"
        ) from exc
