"""A test harness for two keyed inputs (in the spirit of Flink's
``KeyedTwoInputStreamOperatorTestHarness``): a :class:`KeyedCoProcessFunction` fed by hand
from either input, with one keyed backend, one watermark and one set of timers shared by both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgumentError
from .functions import KeyedCoProcessFunction
from .harness import KeyedProcessFunctionHarness


class KeyedCoProcessFunctionHarness(KeyedProcessFunctionHarness):
    """Drives one subtask of a :class:`KeyedCoProcessFunction`.

    ``key_selector1`` and ``key_selector2`` give the key of an element of each input; keys
    are "the same" across inputs by the one rule of :mod:`flinkstate.state.types.canonical`
    (a namedtuple and a tuple of equal fields are one key). Every keyword of
    :class:`KeyedProcessFunctionHarness` applies (``watermark_delay`` moves the watermark
    with the elements of both inputs, as the Spark runner does).
    """

    def __init__(
        self,
        function: KeyedCoProcessFunction,
        key_selector1: Callable[[Any], Any],
        key_selector2: Callable[[Any], Any],
        **options: Any,
    ) -> None:
        if not isinstance(function, KeyedCoProcessFunction):
            raise InvalidArgumentError(
                f"expected a KeyedCoProcessFunction, got {function!r}", code="INVALID_FUNCTION"
            )
        if not callable(key_selector2):
            raise InvalidArgumentError(f"key_selector2 must be callable, got {key_selector2!r}")
        super().__init__(function, key_selector1, **options)
        self.key_selector2 = key_selector2

    def process_element1(self, value: Any, timestamp: int | None = None) -> None:
        """Feed one element of the first input (``timestamp``: its event time)."""
        self.operator.process_element(self.key_selector(value), value, timestamp, 1)
        self._collect()

    def process_element2(self, value: Any, timestamp: int | None = None) -> None:
        """Feed one element of the second input (``timestamp``: its event time)."""
        self.operator.process_element(self.key_selector2(value), value, timestamp, 2)
        self._collect()

    def __enter__(self) -> KeyedCoProcessFunctionHarness:
        return self
