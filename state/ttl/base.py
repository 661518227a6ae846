"""The TTL decorator's shared base: the wrapped state, the clock and the expiry rule.

Stored values are ``(last_access_timestamp, value)`` tuples (Flink's TtlValue, with
the timestamp first as in Flink's serialized form). A value is expired when
``now >= timestamp + ttl``. Every access reads the clock once and hands "now" to the
cleanup callback too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..errors import StateAccessError
from ..interfaces import InternalKvState, InternalMergingState
from .config import StateTtlConfig, StateVisibility, UpdateType
from .time import LONG_MIN

TtlValue = tuple[int, Any]
AccessCallback = Callable[[int], None]


def _noop(now: int) -> None:
    return None


class TtlContext:
    """What every TTL decorator and TTL function of one state shares."""

    __slots__ = ("ttl", "now", "update_on_read", "return_expired")

    def __init__(self, config: StateTtlConfig, now: Callable[[], int]) -> None:
        self.ttl = config.ttl_ms
        self.now = now
        self.update_on_read = config.update_type is UpdateType.OnReadAndWrite
        self.return_expired = config.state_visibility is StateVisibility.ReturnExpiredIfNotCleanedUp

    @staticmethod
    def stamp_at(now: int) -> int:
        """``now`` as a timestamp to write (event time: only once there is a watermark)."""
        if now == LONG_MIN:
            raise StateAccessError(
                "event-time TTL state is written before any watermark: call "
                "backend.advance_watermark(ts) first",
                code="NO_WATERMARK",
            )
        return now

    def stamp(self) -> int:
        return self.stamp_at(self.now())

    def unexpired(self, stored: TtlValue | None) -> Any:
        """The user value, or ``None`` when absent or (unless returned) expired."""
        if stored is None:
            return None
        if not self.return_expired and stored[0] + self.ttl <= self.now():
            return None
        return stored[1]


class AbstractTtlState(InternalMergingState):
    """Wraps the backend's state of TtlValues; runs the cleanup callback on every access."""

    __slots__ = ("original", "_ttl", "_access")

    expire: Any = None
    """For kinds with per-element timestamps: see :data:`cleanup.Expire`."""

    def __init__(self, original: InternalKvState, ttl: TtlContext, access: AccessCallback | None) -> None:
        self.original: Any = original
        self._ttl = ttl
        self._access = access or _noop

    def _now(self) -> int:
        now = self._ttl.now()
        self._access(now)
        return now

    def set_current_namespace(self, namespace: Any) -> None:
        self.original.set_current_namespace(namespace)

    def clear(self) -> None:
        self.original.clear()
        self._access(self._ttl.now())

    def get_internal(self) -> Any:
        return self.original.get_internal()

    def update_internal(self, value: Any) -> None:
        self.original.update_internal(value)

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        self._now()
        self.original.merge_namespaces(target, sources)

    def _checked_value(self, now: int) -> Any:
        """Read a whole TtlValue: drop it when expired (returning it once if configured)."""
        stored = self.original.get_internal()
        if stored is None:
            return None
        ctx = self._ttl
        if stored[0] + ctx.ttl <= now:
            self.original.clear()
            return stored[1] if ctx.return_expired else None
        if ctx.update_on_read:
            self.original.update_internal((now, stored[1]))
        return stored[1]
