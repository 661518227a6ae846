"""Storage on any fsspec filesystem: a root URL plus storage options, picklable.

Data files are written once under unique names; the only object that must not already
exist is a manifest, created with :meth:`Storage.create_exclusive` (a hard link of a
finished temporary file locally, ``If-None-Match`` on S3, exclusive create elsewhere),
so it appears whole or not at all. Bytes read are counted, for tests and benchmarks.
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

import fsspec

from flinkstate.state.extras import missing

from .errors import CheckpointError, CheckpointExistsError, CheckpointNotFoundError
from .storage_calls import OutputFile, calling, typed, with_defaults


class InputFile:
    """A read-only, seekable file that adds what it reads to its storage's counter (none:
    a local copy, see :mod:`.local_cache`); ``size``: the file's, when ``raw`` cannot say."""

    def __init__(self, raw: Any, storage: Storage | None, size: int | None = None) -> None:
        self._raw = raw
        self._storage = storage
        self._size = size

    def read(self, size: int = -1) -> bytes:
        with calling(self._storage, "a read"):
            data: bytes = self._raw.read(size)
        if self._storage is not None:
            self._storage._add_read(len(data))
        return data

    def readinto(self, buf: Any) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        with calling(self._storage, "a seek"):
            return int(self._raw.seek(offset, whence))

    def tell(self) -> int:
        return int(self._raw.tell())

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return bool(self._raw.closed)

    @property
    def size(self) -> int:
        return int(self._raw.size) if self._size is None else self._size

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> InputFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Storage:
    """A directory tree on one fsspec filesystem. Pickles as its URL and options."""

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        if not isinstance(url, str) or not url:
            raise CheckpointError(f"a storage URL must be a non-empty str, got {url!r}", code="INVALID_PATH")
        self.url = url
        self.options = dict(storage_options or {})
        try:
            self.fs, self.root = fsspec.core.url_to_fs(url, **with_defaults(url, self.options))
        except ImportError as exc:
            if url.split("://", 1)[0] in ("s3", "s3a"):
                raise missing("s3fs", f"storage {_redact(url)}") from exc
            raise CheckpointError(f"cannot open storage {_redact(url)}: {exc}", code="INVALID_PATH") from exc
        except (ValueError, TypeError) as exc:
            raise CheckpointError(f"cannot open storage {_redact(url)}: {exc}", code="INVALID_PATH") from exc
        self.root = self.root.rstrip("/") or "/"
        self.protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        self._lock = threading.Lock()
        self.bytes_read = 0
        self.files_opened = 0

    def __reduce__(self) -> tuple[Any, ...]:
        return (Storage, (self.url, self.options))

    def __repr__(self) -> str:
        return f"Storage({_redact(self.url)})"

    @property
    def safe_url(self) -> str:
        """The URL without credentials embedded in it: what may be printed."""
        return _redact(self.url)

    def _add_read(self, n: int) -> None:
        with self._lock:
            self.bytes_read += n

    @property
    def is_local(self) -> bool:
        return self.protocol in ("file", "local")

    def path(self, *parts: str) -> str:
        """The full path of ``parts`` (relative, '/'-separated) under the root."""
        return posixpath.normpath(posixpath.join(self.root, *parts))

    def child(self, relative: str) -> Storage:
        """Storage rooted at a subdirectory (same filesystem and options)."""
        sep = "" if self.url.endswith("/") else "/"
        return Storage(self.url + sep + relative, self.options)

    # -- reading ---------------------------------------------------------------

    @typed("checking")
    def exists(self, relative: str) -> bool:
        return bool(self.fs.exists(self.path(relative)))

    @typed("reading")
    def read_bytes(self, relative: str) -> bytes:
        try:
            with self.fs.open(self.path(relative), "rb") as f:
                data: bytes = f.read()
        except FileNotFoundError as exc:
            raise CheckpointNotFoundError(f"{relative} does not exist under {self!r}") from exc
        with self._lock:
            self.files_opened += 1
            self.bytes_read += len(data)
        return data

    @typed("opening")
    def open_input(self, relative: str) -> InputFile:
        """A seekable input file for ranged reads (Parquet footers, row groups)."""
        try:
            raw = self.fs.open(self.path(relative), "rb", cache_type="none")
        except FileNotFoundError as exc:
            raise CheckpointNotFoundError(f"{relative} does not exist under {self!r}") from exc
        with self._lock:
            self.files_opened += 1
        return InputFile(raw, self)

    @typed("sizing")
    def size(self, relative: str) -> int:
        return int(self.fs.size(self.path(relative)))

    @typed("listing")
    def list_dir(self, relative: str = "") -> list[str]:
        """Names (not paths) directly under ``relative``; empty if it does not exist."""
        base = self.path(relative) if relative else self.root
        self.fs.invalidate_cache(base)
        try:
            entries = self.fs.ls(base, detail=False)
        except FileNotFoundError:
            return []
        return sorted(posixpath.basename(str(e).rstrip("/")) for e in entries)

    @typed("listing")
    def file_sizes(self, relative: str = "") -> dict[str, int]:
        """The files directly under ``relative`` (names, not paths) with their sizes in bytes:
        one fresh listing (a cached one is dropped first), no request per file; empty if it
        does not exist."""
        base = self.path(relative) if relative else self.root
        self.fs.invalidate_cache(base)
        try:
            entries = self.fs.ls(base, detail=True)
        except FileNotFoundError:
            return {}
        return {posixpath.basename(str(e["name"]).rstrip("/")): int(e["size"])
                for e in entries if e.get("type") == "file" and isinstance(e.get("size"), int)}  # fmt: skip

    def walk_files(self, relative: str = "") -> Iterator[str]:
        """Every file under ``relative``, as paths relative to the root."""
        for path, _ in self.walk_files_modified(relative, detail=False):
            yield path

    def walk_files_modified(
        self, relative: str = "", detail: bool = True
    ) -> Iterator[tuple[str, float | None]]:
        """Every file under ``relative`` (a path relative to the root) with when it was last
        modified (epoch seconds; ``None`` when the filesystem does not say, or without
        ``detail``): one listing, no request per file."""
        base = self.path(relative) if relative else self.root
        self.fs.invalidate_cache(base)
        try:
            with calling(self, f"listing {relative}"):
                found = self.fs.find(base, detail=detail)
        except FileNotFoundError:
            return
        prefix = self.root.rstrip("/") + "/"
        for full in found:
            text = str(full)
            if not text.startswith("/") and prefix.startswith("/"):
                text = "/" + text
            path = text[len(prefix) :] if text.startswith(prefix) else text
            yield path, modified_time(found[full]) if detail else None

    # -- writing ---------------------------------------------------------------

    @typed("creating directory")
    def makedirs(self, relative: str) -> None:
        if self.is_local or self.protocol == "memory":
            self.fs.makedirs(self.path(relative), exist_ok=True)

    @typed("writing")
    def write_bytes(self, relative: str, data: bytes) -> None:
        """Write a new (uniquely named) file."""
        self.makedirs(posixpath.dirname(relative))
        with self.fs.open(self.path(relative), "wb") as f:
            f.write(data)

    @typed("opening for writing")
    def open_output(self, relative: str) -> Any:
        """A writable file for a new (uniquely named) file."""
        self.makedirs(posixpath.dirname(relative))
        return OutputFile(self.fs.open(self.path(relative), "wb"), self, relative)

    @typed("creating")
    def create_exclusive(self, relative: str, data: bytes) -> None:
        """Create ``relative`` with ``data`` whole, or raise if it already exists."""
        target = self.path(relative)
        self.makedirs(posixpath.dirname(relative))
        try:
            if self.is_local:
                temp = f"{target}.{uuid.uuid4().hex}.tmp"
                with open(temp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                try:
                    os.link(temp, target)
                finally:
                    os.unlink(temp)
            elif self.protocol == "s3":
                self.fs.pipe_file(target, data, mode="create")
                self.fs.invalidate_cache(posixpath.dirname(target))
            else:
                with self.fs.open(target, "xb") as f:
                    f.write(data)
        except FileExistsError as exc:
            raise CheckpointExistsError(f"{relative} already exists under {self!r}") from exc
        except OSError as exc:
            if _is_precondition_failure(exc):
                raise CheckpointExistsError(f"{relative} already exists under {self!r}") from exc
            raise CheckpointError(
                f"cannot create {relative} under {self!r}: {exc}", code="WRITE_FAILED"
            ) from exc

    @typed("deleting")
    def delete(self, relative: str) -> None:
        """Delete a file or a whole directory; missing ones are ignored."""
        target = self.path(relative)
        try:
            if self.fs.isdir(target):
                self.fs.rm(target, recursive=True)
            else:
                self.fs.rm_file(target)
        except FileNotFoundError:
            pass
        self.fs.invalidate_cache(posixpath.dirname(target))


_TIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "modified", "created", "ctime")
"""Where fsspec filesystems put a file's time: local ``mtime`` (seconds), S3 ``LastModified``
and Azure ``last_modified`` (datetimes), GCS ``updated`` (ISO text), memory ``created``
(seconds from ``find``, a datetime from ``info``); modification before creation."""


def modified_time(info: Mapping[str, Any]) -> float | None:
    """When the file ``info`` (an fsspec ``info``/``find`` entry) describes was last written,
    in epoch seconds; ``None`` when it does not say. A time without a zone is UTC."""
    for key in _TIME_KEYS:
        value = info.get(key)
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                continue
        if isinstance(value, datetime):
            return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def _is_precondition_failure(exc: BaseException) -> bool:
    """Whether a failed create was refused by its precondition (S3's 412, by error code)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, FileExistsError):
            return True
        response = getattr(seen, "response", None)
        if isinstance(response, Mapping):
            error = response.get("Error") or {}
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if error.get("Code") in ("PreconditionFailed", "412") or status == 412:
                return True
        seen = seen.__cause__
    return False


def nested_options(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """fsspec storage options from dotted keys and text values (read options, the command line).

    Dots nest (``client_kwargs.endpoint_url`` -> ``{"client_kwargs": {"endpoint_url": ...}}``);
    a value is JSON where it parses (``true``, ``3``, ``{"a": 1}``), text otherwise (quote it,
    ``'"123"'``, to keep digits text). Messages name keys, never values (they may be secrets).
    """
    out: dict[str, Any] = {}
    for key, raw in pairs:
        parts = key.split(".")
        if not all(parts):
            raise CheckpointError(f"storage option {key!r} has an empty part", code="INVALID_OPTION")
        target = out
        for part in parts[:-1]:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise CheckpointError(
                    f"storage option {key!r} nests under {part!r}, which is also given a value",
                    code="INVALID_OPTION",
                )
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        if isinstance(target.get(parts[-1]), dict):
            raise CheckpointError(
                f"storage option {key!r} is given a value and also has nested options", code="INVALID_OPTION"
            )
        target[parts[-1]] = value
    return out


def _redact(url: str) -> str:
    """A URL safe for messages: no credentials embedded in it."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url
