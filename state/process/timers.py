"""Timers as keyed state: one map state per time domain, scoped to the key, holding timestamps.

A timer is an entry ``timestamp -> True`` of the map state named as Flink names its timer
queues (``_timer_state/event_user-timers``, ``_timer_state/processing_user-timers``) in
the void namespace of its key. So timers are snapshotted, checkpointed and rescaled with
the key groups like any state, and there is one timer per (key, namespace, time). The
order in which they fire lives beside the state in a heap of ``(time, sequence, key)``,
rebuilt from the state on restore; a deleted timer leaves its heap entry behind, and a set
of live timers tells live entries from stale ones (stale ones are dropped when popped, and
the heap is compacted when they outnumber the live ones).
"""

from __future__ import annotations

import enum
import heapq
import itertools
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from ..descriptors import MapStateDescriptor
from ..errors import StateAccessError, StateTypeError
from ..interfaces import MapState
from ..keyed.backend import AbstractKeyedStateBackend
from ..keyed.snapshot import StateMetaInfo
from ..types.mapping import TypeInformation, Types

_timerpath: ModuleType | None
try:
    from . import _timerpath
except ImportError:  # built without a C compiler: the Python method alone
    _timerpath = None


class TimeDomain(enum.Enum):
    """Which clock a timer follows (PyFlink's ``TimeDomain``)."""

    EVENT_TIME = 0
    PROCESSING_TIME = 1


TIMER_STATES = {
    TimeDomain.EVENT_TIME: "_timer_state/event_user-timers",
    TimeDomain.PROCESSING_TIME: "_timer_state/processing_user-timers",
}
"""The keyed state holding each domain's timers (Flink's timer queue names)."""

_COMPACT_MIN = 1024
_MIN_TIME, _MAX_TIME = -(1 << 63), (1 << 63) - 1


def _timer_map(name: str) -> MapStateDescriptor:
    return MapStateDescriptor(name, Types.LONG(), Types.BOOLEAN())


def timer_descriptor(domain: TimeDomain) -> MapStateDescriptor:
    return _timer_map(TIMER_STATES[domain])


def timer_state_meta(name: str, namespace_type: TypeInformation | None) -> StateMetaInfo:
    """The keyed state holding the timers of the timer queue ``name`` (Flink's name,
    ``_timer_state/<event|processing>_<service>``) in namespaces of ``namespace_type`` (None:
    void): the map of timestamps this module keeps, for a restore of another service's timers."""
    desc = _timer_map(name)
    return StateMetaInfo(name, desc.kind, desc.type_info, desc.key_type_info, namespace_type)


class TimerQueue:
    """The timers of one time domain on one keyed backend."""

    __slots__ = ("_backend", "_desc", "_heap", "_key", "_live", "_seq", "_state", "domain")

    def __init__(self, backend: AbstractKeyedStateBackend, domain: TimeDomain) -> None:
        self.domain = domain
        self._backend = backend
        self._key = backend.key_context
        self._desc = timer_descriptor(domain)
        self._heap: list[tuple[int, int, Any]] = []
        self._live: set[tuple[int, Any]] = set()
        self._seq = itertools.count()
        self._state: MapState[int, bool] | None = None
        if self._desc.name in backend.state_names():
            self._restore()

    def _timers(self) -> MapState[int, bool]:
        if self._state is None:
            self._state = self._backend.get_map_state(self._desc)
        return self._state

    def _restore(self) -> None:
        backend = self._backend
        previous = backend.get_current_key()
        state = self._timers()
        for key in list(backend.get_keys(self._desc.name)):
            backend.set_current_key(key)
            for timestamp in sorted(state.keys()):
                self._push(timestamp, backend.get_current_key())
        if previous is not None:
            backend.set_current_key(previous)

    def _push(self, timestamp: int, key: Any) -> None:
        self._live.add((timestamp, key))
        heapq.heappush(self._heap, (timestamp, next(self._seq), key))

    @staticmethod
    def _no_key() -> StateAccessError:
        return StateAccessError(
            "timers are keyed: register or delete them while a key is current "
            "(process_element or on_timer, not process_broadcast_element)",
            code="NO_CURRENT_KEY",
        )

    def register(self, timestamp: int) -> None:
        """A timer at ``timestamp`` for the current key (registering it twice keeps one)."""
        # the per-record path: a plain int in range skips the checks' calls
        if type(timestamp) is not int or not _MIN_TIME <= timestamp <= _MAX_TIME:
            timestamp = _check_time(timestamp)
        key = self._key.key
        if key is None:
            raise self._no_key()
        if (timestamp, key) in self._live:
            return
        self._timers().put(timestamp, True)
        self._push(timestamp, key)

    def delete(self, timestamp: int) -> None:
        """Drop the current key's timer at ``timestamp`` (no timer there: nothing happens)."""
        if type(timestamp) is not int or not _MIN_TIME <= timestamp <= _MAX_TIME:
            timestamp = _check_time(timestamp)
        key = self._key.key
        if key is None:
            raise self._no_key()
        if (timestamp, key) not in self._live:
            return
        self._timers().remove(timestamp)
        self._live.discard((timestamp, key))
        if len(self._heap) > _COMPACT_MIN and len(self._heap) > 2 * len(self._live):
            self._heap = [e for e in self._heap if (e[0], e[2]) in self._live]
            heapq.heapify(self._heap)

    def pop_due(self, time: int) -> Iterator[tuple[int, Any]]:
        """Remove and yield ``(timestamp, key)`` of every timer at or before ``time``, in
        time order; the key is current when each is yielded. Timers registered meanwhile
        that are due fire too."""
        heap = self._heap
        while heap and heap[0][0] <= time:
            timestamp, _, key = heapq.heappop(heap)
            if (timestamp, key) not in self._live:
                continue
            self._live.discard((timestamp, key))
            self._backend.set_current_key(key)
            self._timers().remove(timestamp)
            yield timestamp, key

    def next_time(self) -> int | None:
        """The earliest live timer's time (``None``: no timers)."""
        heap = self._heap
        while heap and (heap[0][0], heap[0][2]) not in self._live:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def __len__(self) -> int:
        return len(self._live)

    def timers(self) -> list[tuple[Any, int]]:
        """Every live ``(key, timestamp)``, in time order (for tests and tools)."""
        return sorted(((k, t) for t, k in self._live), key=lambda p: p[1])


def _check_time(timestamp: Any) -> int:
    if isinstance(timestamp, bool) or not hasattr(timestamp, "__index__"):
        raise StateTypeError(f"a timer time is epoch milliseconds (int), got {timestamp!r}")
    value = int(timestamp)
    if not _MIN_TIME <= value <= _MAX_TIME:
        raise StateTypeError(f"a timer time must fit a LONG, got {value}")
    return value


PYTHON_REGISTER = TimerQueue.register
"""The Python ``register()``: the model of the C fast path and its fallback."""
if _timerpath is not None:
    _timerpath.install(TimerQueue)
