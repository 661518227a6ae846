"""Giving freed memory back to the OS, after large transient allocations (a closed RocksDB,
a large row group written): glibc keeps freed pages in its arenas otherwise, and the
process's resident memory would stay at its peak."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or ``None`` where the C library has none (musl, macOS)."""
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c")), "malloc_trim", None)
    except OSError:
        return None


def trim_heap() -> None:
    """Return free heap pages to the OS: a closed DB's block cache and memtables, and a
    restore's decoded entries, would otherwise stay in the process's resident memory."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
