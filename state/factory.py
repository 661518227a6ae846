"""A keyed backend by name: ``"heap"`` or ``"rocksdb"`` (what runners take as an option)."""

from __future__ import annotations

import os
from collections.abc import Mapping
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
    """A new keyed backend of ``kind``.

    ``"rocksdb"`` needs ``path``, a directory of its own (one per task attempt) and takes
    ``options`` (:class:`RocksDBOptions` or a mapping of its fields); ``"heap"`` takes
    neither.
    """
    check_backend(kind)
    common: dict[str, Any] = {
        "key_type": key_type,
        "max_parallelism": max_parallelism,
        "key_group_range": key_group_range,
        "time_provider": time_provider,
    }
    if kind == "heap":
        if path is not None or options is not None:
            raise InvalidArgumentError(
                "the heap backend takes no directory or RocksDB options", code="INVALID_OPTION"
            )
        return HeapKeyedStateBackend(**common)
    if path is None:
        raise InvalidArgumentError("the rocksdb backend needs a directory (path=...)", code="INVALID_OPTION")
    if options is not None and not isinstance(options, RocksDBOptions):
        options = RocksDBOptions.from_mapping(options)
    return RocksDBKeyedStateBackend(path, options=options, **common)
