"""What a Spark executor keeps for ``process`` runs, shared by all its Python workers.

Spark hands a task to whichever idle Python worker of an executor comes first, and kills a
worker idle for a minute, so what one Python process holds is often gone by the next run.
What the executor's local directory holds is not: Spark gives every Python worker of an
executor the same ``SPARK_LOCAL_DIRS`` and deletes them when the application ends. Under
the first of them, ``flinkstate/`` holds:

- ``live/<slot>/``: one :class:`Slot` per (checkpoint root, operator, subtask): the DB of a
  live RocksDB subtask, closed at the end of the task that wrote it (RocksDB admits one
  process per DB), with a record of the attempt whose checkpoint holds exactly that state
  (``HOLDS``). The next task of the subtask on this executor, in any of its Python
  workers, reopens it when that attempt is the one the latest checkpoint committed, and
  discards it otherwise: only the version a committed checkpoint references is kept.
- ``cache/``: a :class:`~flinkstate.checkpoint.FileCache` of checkpoint files this
  executor read or wrote, so a restore downloads only what it does not hold.
- ``work/``: every other RocksDB working directory (removed with the application).

The directory is bounded by bytes (:attr:`ExecutorStore.max_bytes`): when a task ends,
slots not in use go first, least recently used first, then cached files. Outside Spark
(no ``SPARK_LOCAL_DIRS``) there is no store and tasks work as before: a temporary
directory per backend, nothing kept across processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from typing import IO, Any

from flinkstate.checkpoint import FileCache

HOLDS = "HOLDS"
_LOCK = "slot.lock"


def _size(path: str) -> int:
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


class Slot:
    """The kept DB of one subtask on this executor (module docstring). Claimed by one task
    at a time (an exclusive ``flock``, dropped by the OS when a process dies)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock: IO[str] | None = None

    @property
    def db(self) -> str:
        """Where the kept DB's files are between tasks."""
        return os.path.join(self.path, "db")

    @property
    def backend(self) -> str:
        """The working directory of the backend a task opens in this slot."""
        return os.path.join(self.path, "backend")

    def claim(self) -> bool:
        """Take the slot for this task; ``False`` when another task holds it (a retried or
        speculative attempt of the same subtask on this executor)."""
        os.makedirs(self.path, exist_ok=True)
        lock = open(os.path.join(self.path, _LOCK), "a+")  # noqa: SIM115 (held until release)
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            return False
        self._lock = lock
        return True

    def take(self) -> dict[str, Any] | None:
        """What the slot holds (its record), removed as it is taken: from now until
        :meth:`keep`, the DB is this task's to change, and a task that dies meanwhile
        leaves a slot that holds nothing."""
        record = os.path.join(self.path, HOLDS)
        try:
            with open(record, encoding="utf-8") as f:
                held: dict[str, Any] = json.load(f)
        except (OSError, ValueError):
            held = None  # type: ignore[assignment]
        with contextlib.suppress(OSError):
            os.remove(record)
        if held is None or not os.path.isdir(self.db):
            self.clear()
            return None
        return held

    def clear(self) -> None:
        """Discard the kept DB and the backend's working directory."""
        for path in (self.db, self.backend):
            shutil.rmtree(path, ignore_errors=True)

    def keep(self, record: dict[str, Any]) -> None:
        """The DB is at :attr:`db` again (moved there by the closing backend): record what
        it holds, written whole or not at all."""
        temp = os.path.join(self.path, f"{HOLDS}.tmp")
        with open(temp, "w", encoding="utf-8") as f:
            json.dump(record, f)
        os.replace(temp, os.path.join(self.path, HOLDS))

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


@dataclass(frozen=True)
class ExecutorStore:
    """The local directory ``root`` of one executor (module docstring), at most
    ``max_bytes`` of kept DBs and cached files."""

    root: str
    max_bytes: int

    @staticmethod
    def here(max_bytes: int) -> ExecutorStore | None:
        """This executor's store, under the first of Spark's local directories; ``None``
        outside Spark, or when ``max_bytes`` is 0 (nothing kept)."""
        dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
        first = dirs.split(",")[0].strip()
        if not first or max_bytes <= 0:
            return None
        root = os.path.join(first, "flinkstate")
        try:
            for part in ("live", "cache", "work"):
                os.makedirs(os.path.join(root, part), exist_ok=True)
        except OSError:
            return None
        return ExecutorStore(root, max_bytes)

    @property
    def name(self) -> str:
        """Names this executor in a run's record: its host and a digest of its directory."""
        return f"{socket.gethostname()}/{hashlib.sha256(self.root.encode()).hexdigest()[:8]}"

    @property
    def cache(self) -> FileCache:
        return FileCache(os.path.join(self.root, "cache"), self.max_bytes)

    def work_directory(self, kind: str) -> str:
        """A new working directory for a backend that is not kept."""
        return tempfile.mkdtemp(prefix=f"flinkstate-{kind}-", dir=os.path.join(self.root, "work"))

    def slot(self, root_url: str, uid: str, subtask: int) -> Slot:
        name = hashlib.sha256(json.dumps([root_url, uid, subtask]).encode()).hexdigest()[:32]
        return Slot(os.path.join(self.root, "live", name))

    def trim(self, keep: Slot | None = None) -> None:
        """Hold at most :attr:`max_bytes`: remove slots no task holds (but ``keep``), least
        recently kept first, then cached files (see :meth:`FileCache.trim`)."""
        live = os.path.join(self.root, "live")
        slots = []
        for name in os.listdir(live):
            path = os.path.join(live, name)
            try:
                used = os.stat(os.path.join(path, HOLDS)).st_mtime
            except OSError:
                used = 0.0
            slots.append((used, path))
        cache = self.cache
        sizes = {path: _size(path) for _, path in slots}
        total = sum(sizes.values()) + cache.held_bytes()
        for _, path in sorted(slots):
            if total <= self.max_bytes:
                break
            if keep is not None and path == keep.path:
                continue
            slot = Slot(path)
            if slot.claim():
                try:
                    slot.clear()
                    with contextlib.suppress(OSError):
                        os.remove(os.path.join(path, HOLDS))
                finally:
                    slot.release()
                total -= sizes[path]
        if total > self.max_bytes:
            kept = total - cache.held_bytes()
            FileCache(cache.directory, max(0, self.max_bytes - kept)).trim()
