"""Heap states of mutable values: every read that hands out a stored object records its scope.

Flink's heap backend returns the stored object, so a caller may change a value, a list
element or a map value in place without writing it back; later reads and full checkpoints
see the change. An incremental checkpoint writes only the scopes recorded as changed, so
these reads record their scope too (when something is stored). A mutable state's table
is never snapshot as its record alone (:attr:`StateTable.immutable` is false), so the
increment looks each recorded id up in the frozen snapshot and writes what it holds then.

States of immutable values use the plain classes: their reads record nothing (the value
state's C fast path serves those only).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..descriptors import StateDescriptor
from ..serializers.lookup import serializer_for
from .aggregating_state import HeapAggregatingState
from .list_state import HeapListState
from .map_state import HeapFloatKeyMapState, HeapMapState
from .reducing_state import HeapReducingState
from .state_table import compact
from .value_state import PYTHON_METHODS, HeapValueState


def hands_out_mutable(desc: StateDescriptor) -> bool:
    """Whether reads of ``desc``'s state hand out stored objects that can be mutated in
    place: its value, list element, map value or accumulator type is mutable (the list or
    map containers themselves are copied by the reads)."""
    return not serializer_for(desc.type_info).immutable


class MutableValueState(HeapValueState):
    """A ValueState whose ``value()`` records the scope; both methods stay in Python (the C
    fast path is for immutable values)."""

    __slots__ = ()

    def value(self) -> Any:
        ctx = self._ctx
        kgi = ctx.kgi
        key = ctx.key
        table = self._maps[kgi].fast_table
        if table is None or self._ns is not None or type(key) is tuple:
            return self._handed_out()
        bucket = table[hash(key) % len(table)]
        state = None if bucket is None else bucket.get(key)
        changes = self._changes
        if state is not None and changes:  # recorded as update() records it
            changed = changes[kgi]
            changed.append(key)
            changed.append(state)
            if len(changed) > self._compact_at:
                self._compact_at = compact(changed)
        return state

    update = PYTHON_METHODS[1]

    def get_internal(self) -> Any:
        return self._handed_out()


class MutableListState(HeapListState):
    """A ListState of mutable elements: ``get()`` copies the list, not its elements."""

    __slots__ = ()

    def get(self) -> Iterable[Any]:
        stored = self._handed_out()
        return [] if stored is None else list(stored)

    def get_internal(self) -> Any:
        return self._handed_out()


class MutableMapState(HeapMapState):
    """A MapState of mutable values: ``get``, ``items`` and ``values`` hand them out."""

    __slots__ = ()

    def get(self, key: Any) -> Any:
        stored = self._stored()
        if stored is None:
            return None
        value = stored.get(key)
        if value is not None:
            self._changed(stored)
        return value

    def items(self) -> Iterable[tuple[Any, Any]]:
        stored = self._handed_out()
        return [] if stored is None else list(stored.items())

    def values(self) -> Iterable[Any]:
        stored = self._handed_out()
        return [] if stored is None else list(stored.values())

    def get_internal(self) -> Any:
        return self._handed_out()


class MutableFloatKeyMapState(HeapFloatKeyMapState, MutableMapState):
    """A MapState of mutable values whose user keys have FLOAT parts (both rules apply)."""

    __slots__ = ()


class MutableReducingState(HeapReducingState):
    """A ReducingState of a mutable value: ``get()`` hands it out."""

    __slots__ = ()

    def get(self) -> Any:
        return self._handed_out()

    def get_internal(self) -> Any:
        return self._handed_out()


class MutableAggregatingState(HeapAggregatingState):
    """An AggregatingState of a mutable accumulator: ``get_result`` may hand it out."""

    __slots__ = ()

    def get(self) -> Any:
        acc = self._handed_out()
        return None if acc is None else self._agg.get_result(acc)

    def get_internal(self) -> Any:
        return self._handed_out()
