"""State descriptors: a state's name, kind, types and time-to-live.

The lowest layer of the state API: descriptors name no runtime. A reducing or aggregating
descriptor holds any object with the methods it needs (:class:`Reducer`, :class:`Aggregator`);
PyFlink's ``ReduceFunction`` and ``AggregateFunction`` live with the other user functions
(:mod:`flinkstate.state.process.functions`)."""

from __future__ import annotations

import enum
from abc import ABC
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

from .errors import InvalidArgumentError, StateTypeError
from .ttl.config import StateTtlConfig
from .types.mapping import TypeInformation, to_type_info

IN = TypeVar("IN", contravariant=True)
ACC = TypeVar("ACC")
OUT = TypeVar("OUT", covariant=True)


class StateKind(str, enum.Enum):
    """The kinds of keyed state."""

    VALUE = "value"
    LIST = "list"
    MAP = "map"
    REDUCING = "reducing"
    AGGREGATING = "aggregating"


@runtime_checkable
class Reducer(Protocol):
    """What a reducing state needs of a ``ReduceFunction``: its ``reduce``."""

    def reduce(self, value1: Any, value2: Any, /) -> Any: ...


class Aggregator(Protocol[IN, ACC, OUT]):
    """What an aggregating state needs of an ``AggregateFunction``: its four methods."""

    def create_accumulator(self) -> ACC: ...

    def add(self, value: IN, accumulator: ACC, /) -> ACC: ...

    def get_result(self, accumulator: ACC, /) -> OUT: ...

    def merge(self, acc_a: ACC, acc_b: ACC, /) -> ACC: ...


class StateDescriptor(ABC):
    """Names a state and its types; ``kind`` tells which state it describes."""

    kind: StateKind

    def __init__(self, name: str, type_info: Any) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(
                f"a state name must be a non-empty str, got {name!r}", code="INVALID_STATE_NAME"
            )
        self.name = name
        self.type_info: TypeInformation = to_type_info(type_info)
        self.ttl_config: StateTtlConfig | None = None

    def get_name(self) -> str:
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        """Give the state a time-to-live (a disabled config means none)."""
        if not isinstance(ttl_config, StateTtlConfig):
            raise StateTypeError(f"expected a StateTtlConfig, got {ttl_config!r}", code="INVALID_TTL")
        self.ttl_config = ttl_config if ttl_config.is_enabled() else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.type_info})"


class ValueStateDescriptor(StateDescriptor):
    """A ValueState holding values of ``value_type_info``."""

    kind = StateKind.VALUE

    def __init__(self, name: str, value_type_info: Any) -> None:
        super().__init__(name, value_type_info)


class ListStateDescriptor(StateDescriptor):
    """A ListState of elements of ``elem_type_info``."""

    kind = StateKind.LIST

    def __init__(self, name: str, elem_type_info: Any) -> None:
        super().__init__(name, elem_type_info)
        self.elem_type_info = self.type_info


class MapStateDescriptor(StateDescriptor):
    """A MapState from ``key_type_info`` to ``value_type_info``."""

    kind = StateKind.MAP

    def __init__(self, name: str, key_type_info: Any, value_type_info: Any) -> None:
        super().__init__(name, value_type_info)
        self.key_type_info: TypeInformation = to_type_info(key_type_info)
        self.value_type_info = self.type_info

    def __repr__(self) -> str:
        return f"MapStateDescriptor({self.name!r}, {self.key_type_info}, {self.type_info})"


class ReducingStateDescriptor(StateDescriptor):
    """A ReducingState; ``reduce_function`` is a callable of two values, or else a
    ReduceFunction (any :class:`Reducer`)."""

    kind = StateKind.REDUCING

    def __init__(self, name: str, reduce_function: Any, type_info: Any) -> None:
        super().__init__(name, type_info)
        if callable(reduce_function):
            self.reduce: Callable[[Any, Any], Any] = reduce_function
        elif isinstance(reduce_function, Reducer):
            self.reduce = reduce_function.reduce
        else:
            raise StateTypeError(f"expected a ReduceFunction or callable, got {reduce_function!r}")
        self.reduce_function = reduce_function

    def get_reduce_function(self) -> Any:
        return self.reduce_function


class AggregatingStateDescriptor(StateDescriptor):
    """An AggregatingState; ``state_type_info`` is the accumulator's type."""

    kind = StateKind.AGGREGATING

    def __init__(self, name: str, agg_function: Aggregator[Any, Any, Any], state_type_info: Any) -> None:
        super().__init__(name, state_type_info)
        for method in ("create_accumulator", "add", "get_result", "merge"):
            if not callable(getattr(agg_function, method, None)):
                raise StateTypeError(f"{agg_function!r} is not an AggregateFunction (no {method})")
        self.agg_function = agg_function

    def get_agg_function(self) -> Aggregator[Any, Any, Any]:
        return self.agg_function
