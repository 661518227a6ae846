"""TTL cleanup on RocksDB: the incremental visitor and the compaction-style sweep.

Flink drops expired RocksDB entries in a compaction filter written in C++; rocksdict has
no Python compaction filter, so :class:`TtlCompactionSweep` does the same work amortised
over writes: every ``query_time_after_num_entries`` writes to a state it reads the clock
once and checks as many entries (resuming where it stopped), deleting those whose TTL
timestamp (the first 8 bytes of every stored value, list element and map entry) has
expired, read or not. After a full pass that deleted anything, it compacts the column
family so the bytes on disk fall.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..interfaces import StateIncrementalVisitor
from .codec import timestamp_of
from .column import StateColumn
from .layout import Entries


class RocksDBIncrementalVisitor(StateIncrementalVisitor):
    """Walks a column family in key order, ``BATCH`` (key, namespace) groups at a time.

    Handles are group prefixes. RocksDB keeps no per-bucket hints: :meth:`skip` skips
    nothing and hints are not stored.
    """

    BATCH = 64

    def __init__(self, column: StateColumn) -> None:
        self._col = column
        self._from = b""
        self._at_end = False

    def next_entries(self) -> list[tuple[Any, Any]]:
        if self._at_end:  # the last batch of a pass was returned: report the end once
            self._at_end = False
            return []
        col = self._col
        out: list[tuple[Any, Any]] = []
        bucket: Entries = []
        current: bytes | None = None
        prefix_len = col.layout.prefix_len
        for key, value in col.view().items(from_key=self._from):
            if current is not None and key.startswith(current):
                bucket.append((key, value))
                continue
            if current is not None:
                out.append((current, col.layout.decode(col, current, bucket)))
                if len(out) >= self.BATCH:
                    self._from = key
                    return out
            current = key[: prefix_len(col, key)]
            bucket = [(key, value)]
        if current is not None:
            out.append((current, col.layout.decode(col, current, bucket)))
        self._from = b""  # end of a pass: the next call after this one starts over
        self._at_end = bool(out)
        return out

    def remove(self, handle: Any) -> None:
        self._col.layout.replace(self._col, handle, None)

    def update(self, handle: Any, state: Any) -> None:
        self._col.layout.replace(self._col, handle, state)

    def skip(self, fresh_after: Any) -> int:
        return 0

    def set_hint(self, hint: Any) -> None:
        return None

    def reset_hints(self) -> None:
        return None


class TtlCompactionSweep:
    """``cleanup_in_rocksdb_compact_filter``: deletes expired entries nobody reads."""

    def __init__(self, column: StateColumn, ttl_ms: int, now: Callable[[], int], every: int) -> None:
        self._col = column
        self._ttl = ttl_ms
        self._now = now
        self._every = every
        self._writes = 0
        self._from = b""
        self._deleted_in_pass = 0
        self._sweeping = False

    def record_write(self) -> None:
        self._writes += 1
        if self._writes >= self._every and not self._sweeping:
            self._writes = 0
            self.sweep(self._every)

    def sweep(self, budget: int | None = None) -> int:
        """Check up to ``budget`` entries (``None``: one whole pass); return how many were deleted."""
        self._sweeping = True
        try:
            return self._sweep(budget)
        finally:
            self._sweeping = False

    def _sweep(self, budget: int | None) -> int:
        col = self._col
        cutoff = self._now() - self._ttl
        expired: list[bytes] = []
        finished = True
        for checked, (key, value) in enumerate(col.view().items(from_key=self._from)):
            if budget is not None and checked >= budget:
                self._from = key
                finished = False
                break
            if timestamp_of(value) <= cutoff:
                expired.append(key)
        if expired:
            col.write([], expired)
        self._deleted_in_pass += len(expired)
        if finished:
            self._from = b""
            if self._deleted_in_pass:
                col.view().compact_range(None, None)
            self._deleted_in_pass = 0
        return len(expired)
