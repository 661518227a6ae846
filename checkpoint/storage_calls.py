"""How storage calls fail: the retries an object store gets by default, and every failure
of the storage stack (after those retries) as one typed error, :class:`StorageError`
(``[STORAGE_FAILED]``), whatever the filesystem raised."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

from flinkstate.state.errors import FlinkStateError

from .errors import StorageError

if TYPE_CHECKING:
    from .storage import Storage

_STACK = ("botocore", "aiobotocore", "aiohttp", "s3fs", "fsspec", "gcsfs", "adlfs", "azure", "urllib3")
"""The packages whose exceptions are the storage's failures (after their own retries)."""

S3_DEFAULTS: Mapping[str, Any] = {
    "config_kwargs": {
        "connect_timeout": 10,
        "read_timeout": 60,
        "retries": {"max_attempts": 6, "mode": "standard"},
    },
}
"""What an ``s3://`` storage gets unless its options say otherwise (each key of
``config_kwargs`` separately): botocore's ``standard`` retry mode, 6 attempts a request with
exponential backoff and jitter (500s, 503 SlowDown, resets, timeouts), 10 s to connect and
60 s to wait for each read; s3fs's own ``retries`` (5) stays. Set any of them through the
storage options as s3fs users do: ``{"config_kwargs": {"read_timeout": 5}}``, or
``-o config_kwargs.retries.max_attempts=3`` on the command line."""


def with_defaults(url: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with :data:`S3_DEFAULTS` under the keys they leave unset (``s3://`` only)."""
    found = dict(options)
    if url.split("://", 1)[0] not in ("s3", "s3a"):
        return found
    config = dict(S3_DEFAULTS["config_kwargs"])
    config.update(found.get("config_kwargs") or {})
    found["config_kwargs"] = config
    return found


def failed(storage: Storage | None, what: str, exc: BaseException) -> BaseException:
    """``exc`` as the error to raise: the storage stack's failures as :class:`StorageError`
    (a missing or existing file, and our own errors, stay what they are)."""
    if isinstance(exc, FlinkStateError | FileNotFoundError | FileExistsError):
        return exc
    stack = type(exc).__module__.split(".")[0] in _STACK
    if not (isinstance(exc, OSError) or stack):
        return exc
    where = f" under {storage!r}" if storage is not None else ""
    error = StorageError(f"{what}{where} failed: {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def calling(storage: Storage | None, what: str) -> Iterator[None]:
    """Run the block; a storage failure in it raises :class:`StorageError` (:func:`failed`)."""
    try:
        yield
    except Exception as exc:
        error = failed(storage, what, exc)
        if error is exc:
            raise
        raise error from exc


def typed(what: str) -> Callable[[F], F]:
    """A :class:`Storage` method whose storage failures raise :class:`StorageError` (:func:`failed`)."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def call(self: Storage, *args: Any, **kwargs: Any) -> Any:
            with calling(self, f"{what} {args[0] if args else ''}".rstrip()):
                return method(self, *args, **kwargs)

        return cast(F, call)

    return wrap


class OutputFile:
    """A writable file whose storage failures (a write, the upload at close) raise
    :class:`StorageError`."""

    def __init__(self, raw: Any, storage: Storage, name: str) -> None:
        self._raw = raw
        self._storage = storage
        self._name = name

    def write(self, data: Any) -> int:
        with calling(self._storage, f"writing {self._name}"):
            return int(self._raw.write(data))

    def flush(self) -> None:
        with calling(self._storage, f"flushing {self._name}"):
            self._raw.flush()

    def tell(self) -> int:
        return int(self._raw.tell())

    def close(self) -> None:
        with calling(self._storage, f"closing {self._name}"):
            self._raw.close()

    @property
    def closed(self) -> bool:
        return bool(self._raw.closed)

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
