"""Reduce and aggregate functions the state tests share."""

from __future__ import annotations

from typing import Any

from flinkstate.state import AggregateFunction, ReduceFunction


class Sum(ReduceFunction):
    def reduce(self, value1: int, value2: int) -> int:
        return value1 + value2


class Average(AggregateFunction[int, list[int], float]):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: int, accumulator: list[int]) -> list[int]:
        accumulator[0] += value
        accumulator[1] += 1
        return accumulator

    def get_result(self, accumulator: list[int]) -> float:
        return accumulator[0] / accumulator[1]

    def merge(self, acc_a: list[int], acc_b: list[int]) -> list[int]:
        return [acc_a[0] + acc_b[0], acc_a[1] + acc_b[1]]


class Collect(AggregateFunction[Any, list[Any], list[Any]]):
    """Any type: the accumulator is the list of values added."""

    def create_accumulator(self) -> list[Any]:
        return []

    def add(self, value: Any, accumulator: list[Any]) -> list[Any]:
        return [*accumulator, value]

    def get_result(self, accumulator: list[Any]) -> list[Any]:
        return list(accumulator)

    def merge(self, acc_a: list[Any], acc_b: list[Any]) -> list[Any]:
        return acc_a + acc_b
