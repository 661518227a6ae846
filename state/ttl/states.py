"""The TTL decorators of the five keyed state kinds (Flink's TtlValueState, ...)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..interfaces import AggregatingState, ListState, MapState, ReducingState, ValueState
from ..validation import check_element, checked_elements
from .base import AbstractTtlState


class TtlValueState(AbstractTtlState, ValueState[Any]):
    __slots__ = ()

    def value(self) -> Any:
        return self._checked_value(self._now())

    def update(self, value: Any) -> None:
        now = self._now()
        if value is None:
            self.original.clear()
        else:
            self.original.update_internal((self._ttl.stamp_at(now), value))


class TtlReducingState(AbstractTtlState, ReducingState[Any]):
    __slots__ = ()

    def get(self) -> Any:
        return self._checked_value(self._now())

    def add(self, value: Any) -> None:
        now = self._now()
        if value is None:
            self.original.clear()
        else:
            self.original.add((self._ttl.stamp_at(now), value))


class TtlAggregatingState(AbstractTtlState, AggregatingState[Any, Any]):
    __slots__ = ("_agg",)

    def __init__(self, original: Any, ttl: Any, access: Any, agg_function: Any) -> None:
        super().__init__(original, ttl, access)
        self._agg = agg_function

    def get(self) -> Any:
        acc = self._checked_value(self._now())
        return None if acc is None else self._agg.get_result(acc)

    def add(self, value: Any) -> None:
        self._now()
        if value is None:
            self.original.clear()
        else:
            self.original.add(value)


class TtlListState(AbstractTtlState, ListState[Any]):
    """Each element has its own timestamp; expired elements are dropped on read."""

    __slots__ = ()

    def get(self) -> Iterable[Any]:
        now = self._now()
        stored = self.original.get_internal()
        if not stored:
            return []
        ctx = self._ttl
        cutoff = now - ctx.ttl
        live = [e for e in stored if e[0] > cutoff]
        result = [e[1] for e in (stored if ctx.return_expired else live)]
        if ctx.update_on_read:
            self.original.update_internal([(now, e[1]) for e in live] or None)
        elif len(live) != len(stored):
            self.original.update_internal(live or None)
        return result

    def add(self, value: Any) -> None:
        check_element(value)
        ts = self._ttl.stamp_at(self._now())
        self.original.add((ts, value))

    def add_all(self, values: list[Any]) -> None:
        items = checked_elements(values, "add_all")
        now = self._now()
        if items:
            ts = self._ttl.stamp_at(now)
            self.original.add_all([(ts, v) for v in items])

    def update(self, values: list[Any]) -> None:
        items = checked_elements(values, "update")
        now = self._now()
        ts = self._ttl.stamp_at(now) if items else now
        self.original.update([(ts, v) for v in items])

    @staticmethod
    def expire(stored: Any, cutoff: int, now: int) -> tuple[Any, int]:
        live = [e for e in stored if e[0] > cutoff]
        oldest = min([e[0] for e in live], default=now)
        if len(live) == len(stored):
            return stored, oldest
        return live or None, oldest


class TtlMapState(AbstractTtlState, MapState[Any, Any]):
    """Each entry has its own timestamp; expired entries are dropped on read."""

    __slots__ = ()

    def _entry(self, key: Any, now: int) -> tuple[bool, Any]:
        """(present, value) of one entry, dropping it when expired."""
        stored = self.original.get(key)
        if stored is None:
            return False, None
        ctx = self._ttl
        if stored[0] + ctx.ttl <= now:
            self.original.remove(key)
            return ctx.return_expired, stored[1] if ctx.return_expired else None
        if ctx.update_on_read:
            self.original.put(key, (now, stored[1]))
        return True, stored[1]

    def get(self, key: Any) -> Any:
        return self._entry(key, self._now())[1]

    def contains(self, key: Any) -> bool:
        return self._entry(key, self._now())[0]

    def put(self, key: Any, value: Any) -> None:
        ts = self._ttl.stamp_at(self._now())
        self.original.put(key, (ts, value))

    def put_all(self, dict_value: Mapping[Any, Any] | None) -> None:
        now = self._now()
        if dict_value:
            ts = self._ttl.stamp_at(now)
            self.original.put_all({k: (ts, v) for k, v in dict(dict_value).items()})

    def remove(self, key: Any) -> None:
        self._now()
        self.original.remove(key)

    def items(self) -> Iterable[tuple[Any, Any]]:
        now = self._now()
        stored = self.original.get_internal()
        if not stored:
            return []
        ctx = self._ttl
        cutoff = now - ctx.ttl
        live = {k: e for k, e in stored.items() if e[0] > cutoff}
        result = [(k, e[1]) for k, e in (stored if ctx.return_expired else live).items()]
        if ctx.update_on_read:
            self.original.update_internal({k: (now, e[1]) for k, e in live.items()} or None)
        elif len(live) != len(stored):
            self.original.update_internal(live or None)
        return result

    def keys(self) -> Iterable[Any]:
        return [k for k, _ in self.items()]

    def values(self) -> Iterable[Any]:
        return [v for _, v in self.items()]

    def is_empty(self) -> bool:
        return not self.items()

    @staticmethod
    def expire(stored: Any, cutoff: int, now: int) -> tuple[Any, int]:
        live = {k: e for k, e in stored.items() if e[0] > cutoff}
        oldest = min([e[0] for e in live.values()], default=now)
        if len(live) == len(stored):
            return stored, oldest
        return live or None, oldest
