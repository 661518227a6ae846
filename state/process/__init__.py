"""Keyed process functions (PyFlink's API), timers as keyed state, and a test harness."""

from .coharness import KeyedCoProcessFunctionHarness
from .functions import (
    AggregateFunction,
    BroadcastContext,
    BroadcastOnTimerContext,
    Context,
    Function,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeyedStateStore,
    OnTimerContext,
    ReadOnlyBroadcastState,
    ReadOnlyContext,
    ReduceFunction,
    RuntimeContext,
    TimerService,
)
from .harness import (
    HarnessSnapshot,
    KeyedBroadcastProcessFunctionHarness,
    KeyedProcessFunctionHarness,
    restore_backend,
    take_snapshot,
)
from .metrics import Counter, Distribution, Meter, Metric, MetricGroup
from .operator import KeyedProcessOperator, element_rows
from .side_outputs import OutputTag
from .timers import TIMER_STATES, TimeDomain, TimerQueue

__all__ = [
    "TIMER_STATES",
    "AggregateFunction",
    "BroadcastContext",
    "BroadcastOnTimerContext",
    "Counter",
    "Distribution",
    "Context",
    "Function",
    "HarnessSnapshot",
    "KeyedBroadcastProcessFunction",
    "KeyedBroadcastProcessFunctionHarness",
    "KeyedCoProcessFunction",
    "KeyedCoProcessFunctionHarness",
    "KeyedProcessFunction",
    "KeyedProcessFunctionHarness",
    "KeyedProcessOperator",
    "KeyedStateStore",
    "Meter",
    "Metric",
    "MetricGroup",
    "OnTimerContext",
    "OutputTag",
    "ReadOnlyBroadcastState",
    "ReadOnlyContext",
    "ReduceFunction",
    "RuntimeContext",
    "TimeDomain",
    "TimerQueue",
    "TimerService",
    "element_rows",
    "restore_backend",
    "take_snapshot",
]
