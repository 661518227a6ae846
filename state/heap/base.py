"""The shared base of heap states: scoping to the current key and namespace."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..interfaces import InternalMergingState
from .state_table import COMPACT_AT, StateTable, compact


class AbstractHeapState(InternalMergingState):
    """Reads and writes the state map of the current key group.

    Subclasses spell out their kind's rules; merging kinds define :meth:`_merge`. Every
    write notes its scope in ``_changes`` when the backend records changes (see
    :attr:`StateTable.changes`): two list appends, the id and the state the write left
    (``None`` when it removed the scope). So does every read of a state of mutable values
    (see :mod:`.mutable_reads`): what it hands out may be changed in place.
    """

    __slots__ = ("_changes", "_compact_at", "_ctx", "_maps", "_ns", "_table")

    def __init__(self, table: StateTable, ctx: Any) -> None:
        self._table = table
        self._maps = table.lookup
        self._changes = table.attach(self)
        self._ctx = ctx
        self._ns: Any = None
        self._compact_at = COMPACT_AT

    def _changed(self, state: Any) -> None:
        """Note that the current scope now holds ``state`` (``None``: removed), when recording."""
        if self._changes:
            ctx = self._ctx
            key, ns = ctx.key, self._ns
            changed = self._changes[ctx.kgi]
            changed.append(key if ns is None and type(key) is not tuple else (key, ns))
            changed.append(state)
            if len(changed) > self._compact_at:
                self._compact_at = compact(changed)

    def _handed_out(self) -> Any:
        """The current scope's state, noted as changed when present (whatever it holds is
        handed to a caller who may mutate it in place: states of mutable values only)."""
        ctx = self._ctx
        state = self._maps[ctx.kgi].get(ctx.key, self._ns)
        if state is not None:
            self._changed(state)
        return state

    def set_current_namespace(self, namespace: Any) -> None:
        if namespace is not None:
            self._table.check_namespace(namespace)
        self._ns = namespace

    def clear(self) -> None:
        ctx = self._ctx
        self._maps[ctx.kgi].remove(ctx.key, self._ns)
        self._changed(None)

    def get_internal(self) -> Any:
        ctx = self._ctx
        return self._maps[ctx.kgi].get(ctx.key, self._ns)

    def update_internal(self, value: Any) -> None:
        ctx = self._ctx
        if value is None:
            self._maps[ctx.kgi].remove(ctx.key, self._ns)
        else:
            self._maps[ctx.kgi].put(ctx.key, self._ns, value)
        self._changed(value)

    def _merge(self, a: Any, b: Any) -> Any:
        raise TypeError(f"{type(self).__name__} does not merge namespaces")

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        ctx = self._ctx
        state_map = self._maps[ctx.kgi]
        merged = None
        for source in sources:
            if source == target:
                continue
            self._table.check_namespace(source)
            old = state_map.remove(ctx.key, source)
            if old is not None:
                self._table.record(ctx.kgi, ctx.key, source, None)
                merged = old if merged is None else self._merge(merged, old)
        if merged is not None:
            self._table.check_namespace(target)
            current = state_map.get(ctx.key, target)
            result = merged if current is None else self._merge(current, merged)
            if result is None:  # a TTL merge of expired states leaves nothing
                state_map.remove(ctx.key, target)
            else:
                state_map.put(ctx.key, target, result)
            self._table.record(ctx.kgi, ctx.key, target, result)
