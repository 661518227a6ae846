"""Incremental cleanup (Flink's TtlIncrementalCleanup): a resumable walk over a state's
entries that removes what has expired, a few entries per state access.

Work is paid in advance and in small runs: each access earns ``cleanup_size`` entries of
credit; when the credit is used up, the next run checks at least ``MIN_RUN`` entries
(C-speed filtering) and goes into debt. Debt never outlives a clock tick (entries checked
ahead may have expired since), so after ``n`` accesses at least ``n * cleanup_size``
entries have been checked at the current time or later. After checking a bucket the run leaves
on it the oldest timestamp still there: until that timestamp can expire, later passes
count the bucket as checked without reading it (stamps only grow, so the bound holds;
if the clock goes back, every hint is dropped).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..interfaces import StateIncrementalVisitor

MIN_RUN = 128
Expire = Callable[[Any, int, int], tuple[Any, int]]
"""(stored, cutoff, now) -> (stored without expired parts or None, oldest remaining stamp)."""


class TtlIncrementalCleanup:
    """Runs on every access of one TTL state (and on key changes if configured)."""

    def __init__(
        self,
        visitor: StateIncrementalVisitor,
        cleanup_size: int,
        ttl: int,
        expire: Expire | None,
    ) -> None:
        """``expire`` handles lists and maps; ``None`` means whole ``(ts, value)`` entries."""
        self._visitor = visitor
        self._size = cleanup_size
        self._ttl = ttl
        self._expire = expire
        self._credit = 0
        self._pending: list[tuple[Any, Any]] = []
        self._oldest: Any = None
        self._last_now: Any = None

    def state_accessed(self, now: int) -> None:
        """One access at time ``now``."""
        credit = self._credit + self._size
        if now != self._last_now:
            if self._last_now is not None and now < self._last_now:
                self._visitor.reset_hints()  # the clock went back: hints may be too high
            self._last_now = now
            credit = max(credit, self._size)
        if credit > 0:
            credit -= self._run(credit if credit > MIN_RUN else MIN_RUN, now)
        self._credit = credit

    def _run(self, budget: int, now: int) -> int:
        """Check up to ``budget`` entries (crossing at most one end of pass)."""
        visitor = self._visitor
        cutoff = now - self._ttl
        done = 0
        restarted = False
        while done < budget:
            if not self._pending:
                done += visitor.skip(cutoff)
                if done >= budget:
                    break
                batch = visitor.next_entries()
                if not batch:
                    if restarted:
                        break
                    restarted = True
                    continue
                self._oldest = now
            else:
                batch = self._pending
            room = budget - done
            if len(batch) > room:
                batch, self._pending = batch[:room], batch[room:]
            else:
                self._pending = []
            done += len(batch)
            self._check(batch, cutoff, now)
            if not self._pending:
                visitor.set_hint(self._oldest)
        return done

    def _check(self, batch: list[tuple[Any, Any]], cutoff: int, now: int) -> None:
        visitor = self._visitor
        expire = self._expire
        if expire is None:
            for handle in [h for h, stored in batch if stored[0] <= cutoff]:
                visitor.remove(handle)
            oldest = min([stored[0] for _, stored in batch if stored[0] > cutoff], default=now)
        else:
            oldest = now
            for handle, stored in batch:
                clean, stamp = expire(stored, cutoff, now)
                if clean is None:
                    visitor.remove(handle)
                    continue
                if clean is not stored:
                    visitor.update(handle, clean)
                if stamp < oldest:
                    oldest = stamp
        if oldest < self._oldest:
            self._oldest = oldest
