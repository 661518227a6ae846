"""A backend by name with its RocksDB options, parsed once (``backend_options``): bad ones
are ``[INVALID_OPTION]`` naming them; the result is small, picklable and equal exactly
when the options are."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from flinkstate.state import HeapKeyedStateBackend, RocksDBKeyedStateBackend, RocksDBOptions
from flinkstate.state.errors import InvalidArgumentError
from flinkstate.state.factory import backend_options


def test_options_are_parsed_once_and_compared_by_value() -> None:
    given = backend_options("rocksdb", {"block_cache_bytes": "16777216", "disable_wal": "false"})
    assert given.rocksdb == RocksDBOptions(block_cache_bytes=16 << 20, disable_wal=False)
    assert backend_options("rocksdb", given.rocksdb) == given
    # no options: RocksDB's defaults, the same as given explicitly
    defaults = backend_options("rocksdb")
    assert defaults == backend_options("rocksdb", {}) == backend_options("rocksdb", RocksDBOptions())
    assert defaults != given
    assert backend_options("heap").rocksdb is None
    shipped = pickle.dumps(given)
    assert pickle.loads(shipped) == given and len(shipped) < 400


@pytest.mark.parametrize(
    ("backend", "options", "message"),
    [
        ("rocksdb", {"block_cache": 1}, r"unknown RocksDB option 'block_cache'"),
        ("rocksdb", {"write_buffer_bytes": "lots"}, r"write_buffer_bytes must be a positive int, got 'lots'"),
        ("rocksdb", {"max_write_buffers": 0}, r"max_write_buffers must be a positive int"),
        ("rocksdb", {"disable_wal": "yes"}, r"disable_wal must be a bool"),
        ("rocksdb", [("block_cache_bytes", 1)], r"must be a RocksDBOptions or a mapping"),
        ("heap", {"block_cache_bytes": 1}, r"rocksdb_options are for backend='rocksdb', not backend='heap'"),
        ("heap", RocksDBOptions(), r"not backend='heap'"),
        ("disk", None, r"backend must be one of"),
    ],
)
def test_bad_options_are_invalid_option_errors_naming_them(
    backend: str, options: object, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^\[INVALID_OPTION\] .*" + message):
        backend_options(backend, options)  # type: ignore[arg-type]


def test_the_backend_is_built_with_its_options(tmp_path: Path) -> None:
    heap = backend_options("heap").make(max_parallelism=8)
    assert isinstance(heap, HeapKeyedStateBackend)
    chosen = backend_options("rocksdb", {"block_cache_bytes": 8 << 20})
    rocks = chosen.make(path=tmp_path / "db", max_parallelism=8)
    try:
        assert isinstance(rocks, RocksDBKeyedStateBackend) and rocks.options == chosen.rocksdb
        assert rocks.options.memory_budget == 8 << 20
    finally:
        rocks.close()
