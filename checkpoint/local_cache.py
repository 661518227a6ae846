"""A local copy of checkpoint files, kept on one machine's disk (a Spark executor's).

Checkpoint data files never change once written (unique names; native SST files are
named by their SHA-256), so a copy of one is as good as the original for as long as it
is kept. :class:`FileCache` keeps such copies in a local directory, bounded by bytes
(the least recently used go first), and :meth:`FileCache.storage` wraps a
:class:`~.storage.Storage` so that:

- a read of a data file (``read_bytes``, ``open_input``, ``size``) is served from the
  cache, downloading the whole file into it first on a miss;
- a data file written (``write_bytes``, ``open_output``) is also kept in the cache, so
  the machine that wrote a checkpoint restores it without downloading it.

Native SST files are cached by content (the same bytes under any root share one copy),
other data files by their full path. Manifests are never cached: they name what a
checkpoint holds, and only the storage says which ones exist. What the cache serves is
checked exactly as what the storage serves (see :mod:`.reading.verified`: the same
callers check sizes, checksums and page CRCs); a copy that fails those checks is dropped
with :meth:`FileCache.forget` and the read is done again from the storage.
:attr:`CachedStorage.use` says what reads took from the cache and what they downloaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import CheckpointNotFoundError
from .manifest import METADATA
from .storage import InputFile, Storage

_CHUNK = 1 << 20
DEFAULT_CACHE_BYTES = 4 << 30
"""What an executor's cache of checkpoint files holds at most by default (4 GiB)."""


@dataclass(frozen=True)
class FileCache:
    """Copies of checkpoint files under local ``directory``, at most ``max_bytes`` of them
    (checked after every file added; the least recently used are removed first). Several
    processes may share one directory: files appear whole (renamed in place) and a copy
    removed meanwhile is downloaded again. Small and picklable."""

    directory: str
    max_bytes: int = DEFAULT_CACHE_BYTES

    def storage(self, storage: Storage) -> CachedStorage:
        """``storage`` with its data files read and written through this cache (what it
        took from where: :attr:`CachedStorage.use`)."""
        return CachedStorage(storage.url, storage.options, self)

    def key(self, storage: Storage, relative: str) -> str | None:
        """The cache's name for file ``relative`` of ``storage`` (``None``: never cached)."""
        path = storage.path(relative)
        name = posixpath.basename(path)
        if name == METADATA or not name:
            return None
        parent = posixpath.basename(posixpath.dirname(path))
        if parent == "native" and name.endswith(".sst") and len(name) == 68:  # <SHA-256>.sst
            return f"sst-{name}"
        digest = hashlib.sha256(f"{storage.protocol}://{path}".encode("utf-8", "surrogatepass")).hexdigest()
        return f"f-{digest[:40]}"

    def path(self, key: str) -> str:
        return os.path.join(self.directory, key)

    def lookup(self, key: str) -> str | None:
        """The local copy named ``key`` (marked used now), or ``None``."""
        local = self.path(key)
        try:
            os.utime(local)
        except OSError:
            return None
        return local

    def add(self, key: str, temp: str) -> str:
        """Make the finished local file ``temp`` the copy named ``key``; keep the bound."""
        local = self.path(key)
        os.replace(temp, local)
        self.trim()
        return local

    def temp(self) -> str:
        """A new local path for a copy being made (inside the cache's directory)."""
        os.makedirs(os.path.join(self.directory, "tmp"), exist_ok=True)
        return os.path.join(self.directory, "tmp", uuid.uuid4().hex)

    def forget(self, key: str) -> None:
        with contextlib.suppress(OSError):
            os.remove(self.path(key))

    def held_bytes(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def _entries(self) -> list[tuple[float, int, str]]:
        out = []
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        for name in names:
            if name == "tmp":
                continue
            try:
                st = os.stat(os.path.join(self.directory, name))
            except OSError:
                continue
            out.append((st.st_mtime, st.st_size, name))
        return out

    def trim(self) -> None:
        """Remove the least recently used copies until at most :attr:`max_bytes` remain."""
        entries = sorted(self._entries())
        total = sum(size for _, size, _ in entries)
        for _, size, name in entries:
            if total <= self.max_bytes:
                break
            self.forget(name)
            total -= size


class _TeeOutput:
    """A file written to the storage and, beside it, to a copy that joins the cache once
    the file is closed whole (a failed write leaves no copy)."""

    def __init__(self, remote: Any, cache: FileCache, key: str) -> None:
        self._remote = remote
        self._cache, self._key = cache, key
        self._temp = cache.temp()
        self._local = open(self._temp, "wb")  # noqa: SIM115 (closed by close())
        self._failed = False

    def write(self, data: Any) -> int:
        try:
            n = int(self._remote.write(data))
        except BaseException:
            self._failed = True
            raise
        self._local.write(data)
        return n

    def flush(self) -> None:
        self._remote.flush()

    def tell(self) -> int:
        return int(self._remote.tell())

    @property
    def closed(self) -> bool:
        return bool(self._remote.closed)

    def close(self) -> None:
        if self._local.closed:
            return
        self._local.close()
        try:
            self._remote.close()
        except BaseException:
            self._failed = True
            raise
        finally:
            if self._failed:
                with contextlib.suppress(OSError):
                    os.remove(self._temp)
            else:
                self._cache.add(self._key, self._temp)

    def __enter__(self) -> _TeeOutput:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:
            self._failed = True
        self.close()


@dataclass
class CacheUse:
    """What reads through a :class:`CachedStorage` (and its children) took from where."""

    served: set[str] = field(default_factory=set)
    """Cache keys served from the cache without a download."""
    fetched: set[str] = field(default_factory=set)
    """Cache keys downloaded into the cache."""
    downloaded: int = 0
    """Bytes of data files downloaded from the storage."""


class CachedStorage(Storage):
    """A :class:`Storage` whose data files go through a :class:`FileCache` (module docstring)."""

    def __init__(
        self,
        url: str,
        storage_options: Mapping[str, Any] | None,
        cache: FileCache,
        use: CacheUse | None = None,
    ) -> None:
        super().__init__(url, storage_options)
        self.cache = cache
        self.use = use if use is not None else CacheUse()

    def __reduce__(self) -> tuple[Any, ...]:
        return (CachedStorage, (self.url, self.options, self.cache))

    def child(self, relative: str) -> CachedStorage:
        plain = super().child(relative)
        return CachedStorage(plain.url, plain.options, self.cache, self.use)

    def _local(self, relative: str) -> str | None:
        """The cached copy of ``relative`` (downloaded first on a miss); ``None``: not cached."""
        key = self.cache.key(self, relative)
        if key is None:
            return None
        local = self.cache.lookup(key)
        if local is not None:
            self.use.served.add(key)
            return local
        temp = self.cache.temp()
        try:
            with super().open_input(relative) as src, open(temp, "wb") as dst:
                while chunk := src.read(_CHUNK):
                    dst.write(chunk)
                    self.use.downloaded += len(chunk)
            local = self.cache.add(key, temp)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(temp)
            raise
        self.use.fetched.add(key)
        return local

    def forget_served(self) -> None:
        """Drop every copy reads took from the cache (one of them failed a check)."""
        for key in self.use.served | self.use.fetched:
            self.cache.forget(key)
        self.use.served.clear()
        self.use.fetched.clear()

    def read_bytes(self, relative: str) -> bytes:
        local = self._local(relative)
        if local is None:
            return super().read_bytes(relative)
        try:
            with open(local, "rb") as f:
                return f.read()
        except FileNotFoundError:  # removed by another process meanwhile
            return super().read_bytes(relative)

    def open_input(self, relative: str) -> InputFile:
        local = self._local(relative)
        if local is None:
            return super().open_input(relative)
        try:
            raw = open(local, "rb")  # noqa: SIM115 (closed with the InputFile)
        except FileNotFoundError:  # removed by another process meanwhile
            return super().open_input(relative)
        return InputFile(raw, None, os.fstat(raw.fileno()).st_size)

    def size(self, relative: str) -> int:
        try:
            local = self._local(relative)
        except CheckpointNotFoundError as exc:
            raise FileNotFoundError(str(exc)) from exc
        if local is None:
            return super().size(relative)
        try:
            return os.stat(local).st_size
        except FileNotFoundError:
            return super().size(relative)

    def write_bytes(self, relative: str, data: bytes) -> None:
        super().write_bytes(relative, data)
        key = self.cache.key(self, relative)
        if key is not None:
            temp = self.cache.temp()
            with open(temp, "wb") as f:
                f.write(data)
            self.cache.add(key, temp)

    def open_output(self, relative: str) -> Any:
        remote = super().open_output(relative)
        key = self.cache.key(self, relative)
        return remote if key is None else _TeeOutput(remote, self.cache, key)

    def delete(self, relative: str) -> None:
        super().delete(relative)
        key = self.cache.key(self, relative)
        if key is not None:
            self.cache.forget(key)
