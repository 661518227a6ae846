"""Live keyed and operator state: key groups, types, descriptors, backends.

Names follow PyFlink (``pyflink.datastream.state``, ``pyflink.common.typeinfo.Types``),
so state code written for PyFlink ports by changing imports.

The faces of ``state/``: the only modules of it that the upper layers ``connector/`` and
``cli/`` import (import contracts in ``pyproject.toml`` hold them to it):

- ``flinkstate.state`` (this module): the user's API. Descriptors and ``Types``, state
  interfaces, user functions and ``OutputTag``, the heap and RocksDB backends (by class or
  by name: :func:`make_keyed_backend`, :class:`BackendOptions`), operator state, TTL
  config, key-group assignment, snapshots' descriptions, and the errors.
- ``flinkstate.state.types``: the type information classes and the canonical forms of keys
  and values that checkpoints store.
- ``flinkstate.state.keygroups``: key-group assignment, per key type and per Arrow column.
- ``flinkstate.state.process``: process functions and their contexts, the harnesses, and
  what a runner drives (the operator, its rows, side outputs, timer states).
- ``flinkstate.state.operator``: operator state, its data and modes, and repartitioning.
- ``flinkstate.state.ttl``: the TTL config with its enums, and the clocks.
- ``flinkstate.state.rocksdb``: the RocksDB backend and its options.
- ``flinkstate.state.extras``: optional dependencies, each missing one a typed error
  naming the package extra that installs it.

Every other module is internal: backends' parts (``heap/``, ``rocksdb/``, ``keyed/``),
serializers and TTL's decorators. Below the faces the modules import without a cycle:
errors and types, then descriptors (which name no runtime), the keyed base with TTL, the
backends, and the process runtime on top.
"""

from .descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
    ValueStateDescriptor,
)
from .errors import (
    FlinkStateError,
    InvalidArgumentError,
    MissingExtraError,
    ProcessFunctionError,
    SerializationError,
    StateAccessError,
    StateConflictError,
    StateMigrationError,
    StateTypeError,
)
from .factory import BackendOptions, backend_options, make_keyed_backend
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
    AggregateFunction,
    Counter,
    Distribution,
    Function,
    KeyedBroadcastProcessFunction,
    KeyedBroadcastProcessFunctionHarness,
    KeyedCoProcessFunction,
    KeyedCoProcessFunctionHarness,
    KeyedProcessFunction,
    KeyedProcessFunctionHarness,
    KeyedStateStore,
    Meter,
    Metric,
    MetricGroup,
    OutputTag,
    ReadOnlyBroadcastState,
    ReduceFunction,
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
    "BackendOptions",
    "BroadcastState",
    "Counter",
    "Distribution",
    "FlinkStateError",
    "Function",
    "HeapKeyedStateBackend",
    "InvalidArgumentError",
    "MissingExtraError",
    "KeyGroupRange",
    "KeyedBroadcastProcessFunction",
    "KeyedBroadcastProcessFunctionHarness",
    "KeyedCoProcessFunction",
    "KeyedCoProcessFunctionHarness",
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
    "backend_options",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "make_keyed_backend",
]
