"""A metric group with PyFlink's API (``pyflink.metrics``), kept in the subtask.

Flink reports a function's metrics to its metric reporters; flinkstate has no reporter,
so what ``get_metrics_group()`` returns only records locally: counters and meters count
(``get_count()`` reads them back), gauges hold their callable (``value()`` calls it),
and a distribution keeps count, sum, min and max of its updates. Code written for PyFlink
that registers metrics runs unchanged; nothing is reported anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..errors import InvalidArgumentError


def _checked_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(
            f"a metric or group name must be a non-empty str, got {name!r}", code="INVALID_METRIC_NAME"
        )
    return name


class Metric:
    """The base of the metrics (PyFlink's ``Metric``)."""


class Counter(Metric):
    """PyFlink's ``Counter``: ``inc``, ``dec`` and ``get_count``."""

    def __init__(self) -> None:
        self._count = 0

    def inc(self, n: int = 1) -> None:
        self._count += n

    def dec(self, n: int = 1) -> None:
        self._count -= n

    def get_count(self) -> int:
        return self._count


class Meter(Metric):
    """PyFlink's ``Meter``: ``mark_event`` and ``get_count`` (no rate: nothing reports it)."""

    def __init__(self, time_span_in_seconds: int = 60) -> None:
        self.time_span_in_seconds = time_span_in_seconds
        self._count = 0

    def mark_event(self, value: int = 1) -> None:
        self._count += value

    def get_count(self) -> int:
        return self._count


class Distribution(Metric):
    """PyFlink's ``Distribution``: ``update``; keeps count, sum, min and max."""

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0
        self.min: int | None = None
        self.max: int | None = None

    def update(self, value: int) -> None:
        self.count += 1
        self.sum += value
        self.min = value if self.min is None else min(self.min, value)
        self.max = value if self.max is None else max(self.max, value)


class Gauge(Metric):
    """A registered gauge: ``value()`` calls the function it was registered with."""

    def __init__(self, obj: Callable[[], int]) -> None:
        self._obj = obj

    def value(self) -> int:
        return self._obj()


M = TypeVar("M", Counter, Meter, Distribution, Gauge)


class MetricGroup:
    """PyFlink's ``MetricGroup``: ``add_group``, ``counter``, ``gauge``, ``meter`` and
    ``distribution``. Asking twice for one name gives the same metric."""

    def __init__(self, scope: tuple[str, ...] = ()) -> None:
        self.scope = scope
        self._groups: dict[tuple[str, str | None], MetricGroup] = {}
        self.metrics: dict[str, Counter | Meter | Distribution | Gauge] = {}

    def add_group(self, name: str, extra: str | None = None) -> MetricGroup:
        """A subgroup ``name``, or with ``extra`` the key-value group ``name=extra``."""
        key = (_checked_name(name), extra)
        if key not in self._groups:
            sub = (name,) if extra is None else (name, extra)
            self._groups[key] = MetricGroup(self.scope + sub)
        return self._groups[key]

    def _metric(self, name: str, kind: type[M], make: Callable[[], M]) -> M:
        existing = self.metrics.setdefault(_checked_name(name), make())
        if not isinstance(existing, kind):
            raise InvalidArgumentError(
                f"metric {name!r} of group {'.'.join(self.scope) or '<root>'} is a "
                f"{type(existing).__name__}, not a {kind.__name__}",
                code="INVALID_METRIC_NAME",
            )
        return existing

    def counter(self, name: str) -> Counter:
        return self._metric(name, Counter, Counter)

    def gauge(self, name: str, obj: Callable[[], int]) -> None:
        if not callable(obj):
            raise InvalidArgumentError(f"a gauge needs a callable, got {obj!r}", code="INVALID_METRIC_NAME")
        self._metric(name, Gauge, lambda: Gauge(obj))

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:
        return self._metric(name, Meter, lambda: Meter(time_span_in_seconds))

    def distribution(self, name: str) -> Distribution:
        return self._metric(name, Distribution, Distribution)
