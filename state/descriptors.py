"""State descriptors and the functions that reducing/aggregating states apply."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .errors import InvalidArgumentError, StateTypeError
from .types.mapping import TypeInformation, to_type_info

if TYPE_CHECKING:
    from .process.functions import RuntimeContext
    from .ttl.config import StateTtlConfig

IN = TypeVar("IN")
ACC = TypeVar("ACC")
OUT = TypeVar("OUT")


class StateKind(str, enum.Enum):
    """The kinds of keyed state."""

    VALUE = "value"
    LIST = "list"
    MAP = "map"
    REDUCING = "reducing"
    AGGREGATING = "aggregating"


class Function(ABC):  # noqa: B024 - PyFlink's Function has no abstract method
    """The base of user functions (PyFlink's ``Function``): optional ``open``/``close``."""

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: B027 - optional hook
        """Called once before the function is first used."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Called once after its last use."""


class ReduceFunction(Function):
    """Combines two values into one (PyFlink's ``ReduceFunction``).

    The process operator calls ``open`` when a state of it is first created through the
    runtime context and ``close`` when the operator closes."""

    @abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any: ...


class AggregateFunction(Function, Generic[IN, ACC, OUT]):
    """Folds inputs into an accumulator (PyFlink's ``AggregateFunction``); ``open`` and
    ``close`` are called as for :class:`ReduceFunction`."""

    @abstractmethod
    def create_accumulator(self) -> ACC: ...

    @abstractmethod
    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    @abstractmethod
    def get_result(self, accumulator: ACC) -> OUT: ...

    @abstractmethod
    def merge(self, acc_a: ACC, acc_b: ACC) -> ACC: ...


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
        from .ttl.config import StateTtlConfig

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
    """A ReducingState; ``reduce_function`` is a ReduceFunction or a callable."""

    kind = StateKind.REDUCING

    def __init__(self, name: str, reduce_function: Any, type_info: Any) -> None:
        super().__init__(name, type_info)
        if isinstance(reduce_function, ReduceFunction):
            self.reduce: Callable[[Any, Any], Any] = reduce_function.reduce
        elif callable(reduce_function):
            self.reduce = reduce_function
        else:
            raise StateTypeError(f"expected a ReduceFunction or callable, got {reduce_function!r}")
        self.reduce_function = reduce_function

    def get_reduce_function(self) -> Any:
        return self.reduce_function


class AggregatingStateDescriptor(StateDescriptor):
    """An AggregatingState; ``state_type_info`` is the accumulator's type."""

    kind = StateKind.AGGREGATING

    def __init__(
        self, name: str, agg_function: AggregateFunction[Any, Any, Any], state_type_info: Any
    ) -> None:
        super().__init__(name, state_type_info)
        for method in ("create_accumulator", "add", "get_result", "merge"):
            if not callable(getattr(agg_function, method, None)):
                raise StateTypeError(f"{agg_function!r} is not an AggregateFunction (no {method})")
        self.agg_function = agg_function

    def get_agg_function(self) -> AggregateFunction[Any, Any, Any]:
        return self.agg_function
