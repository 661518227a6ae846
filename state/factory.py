"""A keyed backend by name: ``"heap"`` or ``"rocksdb"`` (what runners take as an option),
with its RocksDB options parsed once (:func:`backend_options`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidArgumentError
from .heap.backend import HeapKeyedStateBackend
from .keyed.backend import AbstractKeyedStateBackend
from .keygroups.assignment import KeyGroupRange
from .rocksdb import RocksDBKeyedStateBackend, RocksDBOptions

BACKENDS = ("heap", "rocksdb")
"""The keyed backends by name; ``"rocksdb"`` keeps its state in a local directory."""


def check_backend(kind: object) -> str:
    """``kind`` when it names a keyed backend, else an ``[INVALID_OPTION]`` error."""
    if not isinstance(kind, str) or kind not in BACKENDS:
        raise InvalidArgumentError(
            f"backend must be one of {list(BACKENDS)}, got {kind!r}", code="INVALID_OPTION"
        )
    return kind


def needs_directory(kind: str) -> bool:
    """Whether the keyed backend ``kind`` needs a local directory of its own (``path=``)."""
    return check_backend(kind) == "rocksdb"


@dataclass(frozen=True)
class BackendOptions:
    """A keyed backend by name and its parsed options: small, picklable, and equal to
    another exactly when both build the same kind of backend (a runner reuses a live
    backend only for equal ones)."""

    kind: str
    rocksdb: RocksDBOptions | None = None
    """The RocksDB backend's options (its defaults unless given); None for the heap."""

    @property
    def needs_directory(self) -> bool:
        return needs_directory(self.kind)

    def make(
        self,
        *,
        path: str | os.PathLike[str] | None = None,
        key_type: Any = None,
        max_parallelism: int = 128,
        key_group_range: KeyGroupRange | None = None,
        time_provider: Any = None,
    ) -> AbstractKeyedStateBackend:
        """A new keyed backend of this kind: ``"rocksdb"`` needs ``path``, a directory of
        its own (one per task attempt); ``"heap"`` takes none."""
        common: dict[str, Any] = {
            "key_type": key_type,
            "max_parallelism": max_parallelism,
            "key_group_range": key_group_range,
            "time_provider": time_provider,
        }
        if self.kind == "heap":
            if path is not None:
                raise InvalidArgumentError("the heap backend takes no directory", code="INVALID_OPTION")
            return HeapKeyedStateBackend(**common)
        if path is None:
            raise InvalidArgumentError(
                "the rocksdb backend needs a directory (path=...)", code="INVALID_OPTION"
            )
        return RocksDBKeyedStateBackend(path, options=self.rocksdb, **common)


def backend_options(
    backend: object, rocksdb_options: RocksDBOptions | Mapping[str, Any] | None = None
) -> BackendOptions:
    """``backend`` with ``rocksdb_options`` (a :class:`RocksDBOptions` or a mapping of its
    fields, strings accepted) parsed: ``[INVALID_OPTION]`` for an unknown backend or option,
    a bad value, or options for the heap backend (which would ignore them)."""
    kind = check_backend(backend)
    if kind != "rocksdb":
        if rocksdb_options is not None:
            raise InvalidArgumentError(
                f"rocksdb_options are for backend='rocksdb', not backend={kind!r}", code="INVALID_OPTION"
            )
        return BackendOptions(kind)
    if rocksdb_options is None:
        return BackendOptions(kind, RocksDBOptions())  # equal to the defaults given explicitly
    if isinstance(rocksdb_options, RocksDBOptions):
        return BackendOptions(kind, rocksdb_options)
    if not isinstance(rocksdb_options, Mapping):
        raise InvalidArgumentError(
            f"rocksdb_options must be a RocksDBOptions or a mapping of option names to values, "
            f"got {rocksdb_options!r}",
            code="INVALID_OPTION",
        )
    return BackendOptions(kind, RocksDBOptions.from_mapping(rocksdb_options))


def make_keyed_backend(
    kind: str,
    *,
    path: str | os.PathLike[str] | None = None,
    key_type: Any = None,
    max_parallelism: int = 128,
    key_group_range: KeyGroupRange | None = None,
    time_provider: Any = None,
    options: RocksDBOptions | Mapping[str, Any] | None = None,
) -> AbstractKeyedStateBackend:
    """A new keyed backend of ``kind``, its ``options`` parsed by :func:`backend_options`
    (RocksDB's only) and built by :meth:`BackendOptions.make`."""
    return backend_options(kind, options).make(
        path=path,
        key_type=key_type,
        max_parallelism=max_parallelism,
        key_group_range=key_group_range,
        time_provider=time_provider,
    )
