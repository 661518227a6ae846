"""The keyed state backends every keyed-backend test runs on (``make_backend``, the fixture of
``tests/conftest.py``; the contract: ``tests/contracts/test_keyed_backend.py``): the heap backend
with either state map (copy-on-write with asynchronous snapshots, nested maps without) and RocksDB."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

from flinkstate.state import AbstractKeyedStateBackend, HeapKeyedStateBackend, RocksDBKeyedStateBackend

BackendFactory = Callable[..., AbstractKeyedStateBackend]


_SCRATCH = tempfile.TemporaryDirectory(prefix="flinkstate-tests-")
"""Where test backends' RocksDB directories go: removed when the test process exits, also
those of tests that do not remove their own."""


def rocksdb_backend(**kwargs: Any) -> RocksDBKeyedStateBackend:
    """A RocksDB backend in a fresh temporary directory (removed by ``make_backend``)."""
    return RocksDBKeyedStateBackend(tempfile.mkdtemp(prefix="rocksdb-", dir=_SCRATCH.name), **kwargs)


KEYED_BACKENDS: dict[str, BackendFactory] = {
    "heap-cow": lambda **kw: HeapKeyedStateBackend(async_snapshots=True, **kw),
    "heap-nested": lambda **kw: HeapKeyedStateBackend(async_snapshots=False, **kw),
    "rocksdb": rocksdb_backend,
}
"""Name -> a factory taking the backend's keyword arguments (``key_type``, ``max_parallelism``, ...)."""
