"""Operator states: a list (split or union redistribution) and the broadcast map."""

from __future__ import annotations

import copy
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import InvalidArgumentError
from ..interfaces import ListState, MapState
from ..types.mapping import TypeInformation
from ..validation import checked_elements


class OperatorStateMode(str, enum.Enum):
    """How an operator state is redistributed when parallelism changes."""

    SPLIT_DISTRIBUTE = "split"
    UNION = "union"
    BROADCAST = "broadcast"


@dataclass
class OperatorStateData:
    """One operator state of one subtask, as snapshots carry it.

    ``elements`` is a list (SPLIT_DISTRIBUTE, UNION) or a dict (BROADCAST).
    """

    name: str
    mode: OperatorStateMode
    value_type: TypeInformation
    elements: Any
    user_key_type: TypeInformation | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def copy(self, elements: Any | None = None) -> OperatorStateData:
        """A deep copy; with ``elements``, a copy holding those (taken as they are) instead."""
        data = copy.deepcopy(self.elements) if elements is None else elements
        return replace(self, elements=data, meta=copy.deepcopy(self.meta))


class PartitionableListState(ListState[Any]):
    """An operator list state; redistribution depends on its mode."""

    __slots__ = ("data",)

    def __init__(self, data: OperatorStateData) -> None:
        self.data = data

    def get(self) -> Iterable[Any]:
        return list(self.data.elements)

    def add(self, value: Any) -> None:
        if value is None:
            raise InvalidArgumentError("add: a ListState cannot hold None elements", code="NULL_ELEMENT")
        self.data.elements.append(value)

    def add_all(self, values: list[Any]) -> None:
        self.data.elements.extend(checked_elements(values, "add_all"))

    def update(self, values: list[Any]) -> None:
        self.data.elements = checked_elements(values, "update")

    def clear(self) -> None:
        self.data.elements = []


class BroadcastState(MapState[Any, Any]):
    """A map that every subtask holds in full (each gets a copy on rescaling)."""

    __slots__ = ("data",)

    def __init__(self, data: OperatorStateData) -> None:
        self.data = data

    def get(self, key: Any) -> Any:
        return self.data.elements.get(key)

    def put(self, key: Any, value: Any) -> None:
        if key is None:
            raise InvalidArgumentError("a broadcast state key must not be None", code="NULL_KEY")
        self.data.elements[key] = value

    def put_all(self, dict_value: Mapping[Any, Any] | None) -> None:
        if dict_value is not None:
            for key, value in dict(dict_value).items():
                self.put(key, value)

    def remove(self, key: Any) -> None:
        self.data.elements.pop(key, None)

    def contains(self, key: Any) -> bool:
        return key in self.data.elements

    def items(self) -> Iterable[tuple[Any, Any]]:
        return list(self.data.elements.items())

    def keys(self) -> Iterable[Any]:
        return list(self.data.elements)

    def values(self) -> Iterable[Any]:
        return list(self.data.elements.values())

    def is_empty(self) -> bool:
        return not self.data.elements

    def clear(self) -> None:
        self.data.elements = {}
