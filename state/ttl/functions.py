"""Reduce and aggregate functions over TtlValues (Flink's TtlReduceFunction, TtlAggregateFunction).

An expired operand counts as absent (unless expired values are returned), so adding to
an expired reducing or aggregating state starts afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import TtlContext, TtlValue


class TtlReduceFunction:
    def __init__(self, reduce: Callable[[Any, Any], Any], ttl: TtlContext) -> None:
        self._reduce = reduce
        self._ttl = ttl

    def __call__(self, a: TtlValue, b: TtlValue) -> TtlValue | None:
        ctx = self._ttl
        va, vb = ctx.unexpired(a), ctx.unexpired(b)
        if va is not None and vb is not None:
            return ctx.stamp(), self._reduce(va, vb)
        if va is not None:
            return ctx.stamp(), va
        if vb is not None:
            return ctx.stamp(), vb
        return None


class TtlAggregateFunction:
    def __init__(self, agg: Any, ttl: TtlContext) -> None:
        self._agg = agg
        self._ttl = ttl
        self._merge = TtlReduceFunction(agg.merge, ttl)

    def create_accumulator(self) -> TtlValue:
        return self._ttl.stamp(), self._agg.create_accumulator()

    def add(self, value: Any, accumulator: TtlValue) -> TtlValue:
        acc = self._ttl.unexpired(accumulator)
        if acc is None:
            acc = self._agg.create_accumulator()
        return self._ttl.stamp(), self._agg.add(value, acc)

    def get_result(self, accumulator: TtlValue) -> Any:
        return self._agg.get_result(accumulator[1])

    def merge(self, acc_a: TtlValue, acc_b: TtlValue) -> Any:
        return self._merge(acc_a, acc_b)
