"""Live keyed and operator state: key groups, types, descriptors, backends.

Names follow PyFlink (``pyflink.datastream.state``, ``pyflink.common.typeinfo.Types``),
so state code written for PyFlink ports by changing imports.
"""

from .descriptors import (
    AggregateFunction,
    AggregatingStateDescriptor,
    Function,
    ListStateDescriptor,
    MapStateDescriptor,
    ReduceFunction,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
    ValueStateDescriptor,
)
from .errors import (
    FlinkStateError,
    InvalidArgumentError,
    ProcessFunctionError,
    SerializationError,
    StateAccessError,
    StateConflictError,
    StateMigrationError,
    StateTypeError,
)
from .factory import make_keyed_backend
from .heap.backend import HeapKeyedStateBackend
from .interfaces import (
    AggregatingState,
    AppendingState,
    ListState,
    MapState,
    MergingState,
    ReducingState,
    State,
    ValueState,
)
from .keyed.backend import AbstractKeyedStateBackend
from .keyed.snapshot import KeyedStateSnapshot, StateEntry, StateMetaInfo, StateSnapshot
from .keygroups.assignment import (
    KeyGroupRange,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)
from .operator import BroadcastState, OperatorStateBackend
from .process import (
    Counter,
    Distribution,
    KeyedBroadcastProcessFunction,
    KeyedBroadcastProcessFunctionHarness,
    KeyedProcessFunction,
    KeyedProcessFunctionHarness,
    KeyedStateStore,
    Meter,
    Metric,
    MetricGroup,
    OutputTag,
    ReadOnlyBroadcastState,
    RuntimeContext,
    TimeDomain,
    TimerService,
)
from .rocksdb import RocksDBKeyedStateBackend, RocksDBOptions
from .ttl import StateTtlConfig, Time
from .types.mapping import TypeInformation, Types

__all__ = [
    "AbstractKeyedStateBackend",
    "AggregateFunction",
    "AggregatingState",
    "AggregatingStateDescriptor",
    "AppendingState",
    "BroadcastState",
    "Counter",
    "Distribution",
    "FlinkStateError",
    "Function",
    "HeapKeyedStateBackend",
    "InvalidArgumentError",
    "KeyGroupRange",
    "KeyedBroadcastProcessFunction",
    "KeyedBroadcastProcessFunctionHarness",
    "KeyedProcessFunction",
    "KeyedProcessFunctionHarness",
    "KeyedStateSnapshot",
    "KeyedStateStore",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "MergingState",
    "Meter",
    "Metric",
    "MetricGroup",
    "OperatorStateBackend",
    "OutputTag",
    "ProcessFunctionError",
    "ReadOnlyBroadcastState",
    "ReduceFunction",
    "ReducingState",
    "ReducingStateDescriptor",
    "RocksDBKeyedStateBackend",
    "RocksDBOptions",
    "RuntimeContext",
    "SerializationError",
    "State",
    "StateAccessError",
    "StateConflictError",
    "StateDescriptor",
    "StateEntry",
    "StateKind",
    "StateMetaInfo",
    "StateMigrationError",
    "StateSnapshot",
    "StateTtlConfig",
    "StateTypeError",
    "Time",
    "TimeDomain",
    "TimerService",
    "TypeInformation",
    "Types",
    "ValueState",
    "ValueStateDescriptor",
    "assign_to_key_group",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "make_keyed_backend",
]
