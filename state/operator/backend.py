"""The operator state backend: list (split / union) and broadcast states of one subtask."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..descriptors import ListStateDescriptor, MapStateDescriptor, StateDescriptor
from ..errors import (
    InvalidArgumentError,
    StateAccessError,
    StateConflictError,
    StateMigrationError,
    StateTypeError,
)
from .states import BroadcastState, OperatorStateData, OperatorStateMode, PartitionableListState


class OperatorStateBackend:
    """Operator state of one subtask, optionally restored from ``restored`` states.

    List and union list states share one name space; broadcast states have their own.
    """

    def __init__(self, restored: Iterable[OperatorStateData] = ()) -> None:
        self._lists: dict[str, OperatorStateData] = {}
        self._broadcast: dict[str, OperatorStateData] = {}
        for data in restored:
            target = self._broadcast if data.mode is OperatorStateMode.BROADCAST else self._lists
            if data.name in target:
                raise StateConflictError(
                    f"operator state {data.name!r} is restored twice", code="STATE_MODE_CONFLICT"
                )
            target[data.name] = data.copy()
        self._closed = False

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> PartitionableListState:
        """A list state redistributed by even split on rescaling."""
        return PartitionableListState(self._list(state_descriptor, OperatorStateMode.SPLIT_DISTRIBUTE))

    def get_union_list_state(self, state_descriptor: ListStateDescriptor) -> PartitionableListState:
        """A list state that every subtask gets in full on restore."""
        return PartitionableListState(self._list(state_descriptor, OperatorStateMode.UNION))

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> BroadcastState:
        """A map that every subtask holds in full."""
        desc = self._check(state_descriptor, MapStateDescriptor)
        data = self._broadcast.get(desc.name)
        if data is None:
            data = OperatorStateData(
                desc.name, OperatorStateMode.BROADCAST, desc.type_info, {}, desc.key_type_info
            )
            self._broadcast[desc.name] = data
        else:
            self._check_types(data, desc)
        return BroadcastState(data)

    def _list(self, desc: Any, mode: OperatorStateMode) -> OperatorStateData:
        desc = self._check(desc, ListStateDescriptor)
        data = self._lists.get(desc.name)
        if data is None:
            data = OperatorStateData(desc.name, mode, desc.type_info, [])
            self._lists[desc.name] = data
            return data
        if data.mode is not mode:
            raise StateConflictError(
                f"operator state {desc.name!r} is registered in mode {data.mode.value!r} and "
                f"cannot be fetched in mode {mode.value!r}",
                code="STATE_MODE_CONFLICT",
            )
        self._check_types(data, desc)
        return data

    def _check(self, desc: Any, cls: type[StateDescriptor]) -> Any:
        if self._closed:
            raise StateAccessError("the operator state backend is closed", code="BACKEND_CLOSED")
        if not isinstance(desc, cls):
            raise StateTypeError(f"expected a {cls.__name__}, got {desc!r}", code="WRONG_DESCRIPTOR")
        if desc.ttl_config is not None:
            raise InvalidArgumentError(
                f"state {desc.name!r}: TTL is only supported for keyed state, not operator state",
                code="TTL_NOT_SUPPORTED",
            )
        return desc

    @staticmethod
    def _check_types(data: OperatorStateData, desc: Any) -> None:
        user_key = desc.key_type_info if isinstance(desc, MapStateDescriptor) else None
        if (data.value_type, data.user_key_type) != (desc.type_info, user_key):

            def render(value: Any, key: Any) -> str:
                return str(value) if key is None else f"{key} -> {value}"

            raise StateMigrationError(
                f"operator state {desc.name!r} has type "
                f"{render(data.value_type, data.user_key_type)}; "
                f"it cannot be used with type {render(desc.type_info, user_key)}"
            )

    def get_registered_state_names(self) -> list[str]:
        return list(self._lists)

    def get_registered_broadcast_state_names(self) -> list[str]:
        return list(self._broadcast)

    def snapshot(self) -> list[OperatorStateData]:
        """A deep copy of every state (operator state snapshots are synchronous)."""
        return [data.copy() for data in (*self._lists.values(), *self._broadcast.values())]

    def close(self) -> None:
        self._closed = True
        self._lists.clear()
        self._broadcast.clear()
