"""What every benchmark shares: result lines, medians, timers."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Result:
    """One JSON line. ``ratio`` is ours over the anchor's, oriented so higher is better."""

    id: str
    metric: str
    value: float
    unit: str
    anchor: str
    anchor_value: float
    ratio: float
    goal: str
    met: bool | None  # None: a reference figure with no goal of its own

    def emit(self) -> None:
        data = asdict(self)
        for key in ("value", "anchor_value", "ratio"):
            data[key] = round(data[key], 4)
        print(json.dumps(data), flush=True)


def paired(rounds: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(median ours, median anchor, median of ours/anchor) over rounds measured in pairs:
    load on the shared machine hits both members of a pair alike."""
    return (
        statistics.median(o for o, _ in rounds),
        statistics.median(a for _, a in rounds),
        statistics.median(o / a for o, a in rounds),
    )


def median_of(runs: int, fn: Callable[[], float]) -> float:
    """The median of ``runs`` calls of ``fn`` (the machine is shared and noisy)."""
    return statistics.median(fn() for _ in range(runs))


def timed(fn: Callable[[], Any]) -> float:
    """Seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
