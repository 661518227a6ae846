"""Keyed process functions (PyFlink's API), timers as keyed state, and a test harness.

The face of this package: the user functions and their contexts, the harnesses, and what a
runner drives: :class:`KeyedProcessOperator`, its rows (:func:`element_rows`), side outputs
(:func:`split_side_outputs`, :func:`tag_id_of`) and the timer states' names."""

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
    ProcessFunction,
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
from .side_outputs import OutputTag, split_side_outputs, tag_id_of
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
    "ProcessFunction",
    "ReadOnlyBroadcastState",
    "ReadOnlyContext",
    "ReduceFunction",
    "RuntimeContext",
    "TimeDomain",
    "TimerQueue",
    "TimerService",
    "element_rows",
    "restore_backend",
    "split_side_outputs",
    "tag_id_of",
    "take_snapshot",
]
