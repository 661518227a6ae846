"""Where "now" comes from: the wall clock, a manual clock (tests), or the watermark."""

from __future__ import annotations

import time
from typing import Protocol

LONG_MIN = -(1 << 63)


class TtlTimeProvider(Protocol):
    """Anything with ``current_timestamp() -> int`` (epoch milliseconds)."""

    def current_timestamp(self) -> int: ...


class WallClockTimeProvider:
    """Processing time: the system clock."""

    def current_timestamp(self) -> int:
        return time.time_ns() // 1_000_000


class ManualTimeProvider:
    """A clock that only moves when told to (for tests and replays)."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def current_timestamp(self) -> int:
        return self.now

    def advance(self, milliseconds: int) -> None:
        self.now += milliseconds


class WatermarkTimeProvider:
    """Event time: "now" is the highest watermark the backend was given."""

    def __init__(self) -> None:
        self.watermark = LONG_MIN

    def current_timestamp(self) -> int:
        return self.watermark

    def advance(self, watermark: int) -> None:
        if watermark > self.watermark:
            self.watermark = watermark

    @property
    def started(self) -> bool:
        return self.watermark != LONG_MIN
