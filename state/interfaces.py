"""The state interfaces user code sees (PyFlink's ``pyflink.datastream.state``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")
IN = TypeVar("IN")
OUT = TypeVar("OUT")
K = TypeVar("K")
V = TypeVar("V")


class State(ABC):
    """A piece of state scoped to the current key (and namespace)."""

    __slots__ = ()

    @abstractmethod
    def clear(self) -> None:
        """Remove the value for the current key and namespace."""


class ValueState(State, Generic[T]):
    """One value per key; ``value()`` is ``None`` when there is none."""

    __slots__ = ()

    @abstractmethod
    def value(self) -> T | None: ...

    @abstractmethod
    def update(self, value: T | None) -> None:
        """Set the value; ``None`` removes it."""


class AppendingState(State, Generic[IN, OUT]):
    """State that values are added to."""

    __slots__ = ()

    @abstractmethod
    def get(self) -> OUT: ...

    @abstractmethod
    def add(self, value: IN) -> None: ...


class MergingState(AppendingState[IN, OUT]):
    """Appending state whose namespaces can be merged (windows)."""

    __slots__ = ()


class ListState(MergingState[T, Iterable[T]]):
    """A list per key; an empty list reads as empty; ``None`` elements are refused."""

    __slots__ = ()

    @abstractmethod
    def update(self, values: list[T]) -> None: ...

    @abstractmethod
    def add_all(self, values: list[T]) -> None: ...

    def __iter__(self) -> Iterator[T]:
        """The elements, as ``get()`` gives them (``for x in list_state``, as in PyFlink)."""
        return iter(self.get())


class ReducingState(MergingState[T, T]):
    """Added values are combined with a reduce function into one value."""

    __slots__ = ()


class AggregatingState(MergingState[IN, OUT]):
    """Added values are folded into an accumulator by an AggregateFunction."""

    __slots__ = ()


class MapState(State, Generic[K, V]):
    """A map per key; each entry has its own user key."""

    __slots__ = ()

    @abstractmethod
    def get(self, key: K) -> V | None: ...

    @abstractmethod
    def put(self, key: K, value: V) -> None: ...

    @abstractmethod
    def put_all(self, dict_value: Mapping[K, V] | None) -> None: ...

    @abstractmethod
    def remove(self, key: K) -> None: ...

    @abstractmethod
    def contains(self, key: K) -> bool: ...

    @abstractmethod
    def items(self) -> Iterable[tuple[K, V]]: ...

    @abstractmethod
    def keys(self) -> Iterable[K]: ...

    @abstractmethod
    def values(self) -> Iterable[V]: ...

    @abstractmethod
    def is_empty(self) -> bool: ...

    def __getitem__(self, key: K) -> V | None:
        return self.get(key)

    def __setitem__(self, key: K, value: V) -> None:
        self.put(key, value)

    def __delitem__(self, key: K) -> None:
        self.remove(key)

    def __contains__(self, key: object) -> bool:
        return self.contains(key)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())


class InternalKvState(State):
    """What backends and decorators add: namespaces and raw access."""

    __slots__ = ()

    @abstractmethod
    def set_current_namespace(self, namespace: Any) -> None: ...

    @abstractmethod
    def get_internal(self) -> Any:
        """The stored value for the current key and namespace, ``None`` if absent."""

    @abstractmethod
    def update_internal(self, value: Any) -> None:
        """Store ``value`` as is (``None`` removes)."""


class InternalMergingState(InternalKvState):
    """Merging of namespaces, as windows need it."""

    __slots__ = ()

    @abstractmethod
    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        """Fold the state of every source namespace into ``target`` and clear the sources."""


StoredEntry = tuple[Any, Any, Any]
"""(key, namespace, stored state) as a backend holds it."""


class StateIncrementalVisitor(ABC):
    """A backend's resumable walk over one state's stored entries (for TTL cleanup).

    Batches are ``(handle, stored state)`` pairs; a handle stands for its entry until
    the next batch is fetched.
    """

    @abstractmethod
    def next_entries(self) -> list[tuple[Any, Any]]:
        """The next entries; empty at the end of a pass (the next call starts a new one)."""

    @abstractmethod
    def remove(self, handle: Any) -> None:
        """Remove an entry of the last batch."""

    @abstractmethod
    def update(self, handle: Any, state: Any) -> None:
        """Replace the stored state of an entry of the last batch."""

    @abstractmethod
    def skip(self, fresh_after: Any) -> int:
        """Pass over entries whose bucket hint is above ``fresh_after``; return how many."""

    @abstractmethod
    def set_hint(self, hint: Any) -> None:
        """Store a hint for the bucket of the last batch (a lower bound of what it holds)."""

    @abstractmethod
    def reset_hints(self) -> None:
        """Forget every hint (when what they bound may no longer hold)."""
