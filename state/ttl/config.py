"""StateTtlConfig: time-to-live settings, with PyFlink's builder and names."""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InvalidArgumentError


class Time:
    """A duration in milliseconds (PyFlink's ``Time``)."""

    def __init__(self, milliseconds: int) -> None:
        self._ms = int(milliseconds)

    @staticmethod
    def milliseconds(milliseconds: int) -> Time:
        return Time(milliseconds)

    @staticmethod
    def seconds(seconds: int) -> Time:
        return Time(seconds * 1000)

    @staticmethod
    def minutes(minutes: int) -> Time:
        return Time(minutes * 60_000)

    @staticmethod
    def hours(hours: int) -> Time:
        return Time(hours * 3_600_000)

    @staticmethod
    def days(days: int) -> Time:
        return Time(days * 86_400_000)

    def to_milliseconds(self) -> int:
        return self._ms

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Time) and other._ms == self._ms

    def __hash__(self) -> int:
        return hash(self._ms)

    def __repr__(self) -> str:
        return f"Time({self._ms} ms)"


def ttl_milliseconds(ttl: Any) -> int:
    """A TTL (``timedelta``, ``Time`` or anything with ``to_milliseconds()``) in ms."""
    if isinstance(ttl, datetime.timedelta):
        ms = ttl // datetime.timedelta(milliseconds=1)
    elif hasattr(ttl, "to_milliseconds"):
        ms = int(ttl.to_milliseconds())
    else:
        raise InvalidArgumentError(
            f"a TTL must be a datetime.timedelta or a Time, got {ttl!r}", code="INVALID_TTL"
        )
    if ms <= 0:
        raise InvalidArgumentError(f"a TTL must be positive, got {ms} ms", code="INVALID_TTL")
    return ms


class UpdateType(enum.Enum):
    """When the last-access timestamp is renewed."""

    Disabled = 0
    OnCreateAndWrite = 1
    OnReadAndWrite = 2


class StateVisibility(enum.Enum):
    """Whether an expired value that is still stored may be returned (once)."""

    ReturnExpiredIfNotCleanedUp = 0
    NeverReturnExpired = 1


class TtlTimeCharacteristic(enum.Enum):
    """Which clock "now" comes from: processing time, or (beyond Flink) the watermark."""

    ProcessingTime = 0
    EventTime = 1


@dataclass(frozen=True)
class IncrementalCleanupStrategy:
    cleanup_size: int = 5
    run_cleanup_for_every_record: bool = False


@dataclass(frozen=True)
class RocksdbCompactFilterCleanupStrategy:
    query_time_after_num_entries: int = 1000


@dataclass(frozen=True)
class CleanupStrategies:
    """Which cleanups run; background ones default on (heap: incremental 5, per access)."""

    full_snapshot: bool = False
    incremental: IncrementalCleanupStrategy | None = None
    rocksdb_compact_filter: RocksdbCompactFilterCleanupStrategy | None = None
    cleanup_in_background: bool = True

    def is_cleanup_in_full_snapshot(self) -> bool:
        return self.full_snapshot

    def get_incremental_cleanup_strategy(self) -> IncrementalCleanupStrategy | None:
        if self.incremental is not None:
            return self.incremental
        return IncrementalCleanupStrategy() if self.cleanup_in_background else None

    def get_rocksdb_compact_filter_cleanup_strategy(
        self,
    ) -> RocksdbCompactFilterCleanupStrategy | None:
        if self.rocksdb_compact_filter is not None:
            return self.rocksdb_compact_filter
        return RocksdbCompactFilterCleanupStrategy() if self.cleanup_in_background else None


@dataclass(frozen=True)
class StateTtlConfig:
    """A state's time-to-live. Build one with :meth:`new_builder`."""

    ttl_ms: int
    update_type: UpdateType = UpdateType.OnCreateAndWrite
    state_visibility: StateVisibility = StateVisibility.NeverReturnExpired
    time_characteristic: TtlTimeCharacteristic = TtlTimeCharacteristic.ProcessingTime
    cleanup_strategies: CleanupStrategies = CleanupStrategies()

    @staticmethod
    def new_builder(ttl: Any) -> StateTtlConfigBuilder:
        return StateTtlConfigBuilder(ttl)

    def is_enabled(self) -> bool:
        return self.update_type is not UpdateType.Disabled

    def get_ttl(self) -> Time:
        return Time(self.ttl_ms)

    def get_update_type(self) -> UpdateType:
        return self.update_type

    def get_state_visibility(self) -> StateVisibility:
        return self.state_visibility

    def get_ttl_time_characteristic(self) -> TtlTimeCharacteristic:
        return self.time_characteristic

    def get_cleanup_strategies(self) -> CleanupStrategies:
        return self.cleanup_strategies

    def to_json(self) -> dict[str, Any]:
        """A JSON-able description (for manifests)."""
        cs = self.cleanup_strategies
        inc, rocks = cs.incremental, cs.rocksdb_compact_filter
        return {
            "ttl_ms": self.ttl_ms,
            "update_type": self.update_type.name,
            "state_visibility": self.state_visibility.name,
            "time_characteristic": self.time_characteristic.name,
            "cleanup_full_snapshot": cs.full_snapshot,
            "cleanup_in_background": cs.cleanup_in_background,
            "incremental": None if inc is None else [inc.cleanup_size, inc.run_cleanup_for_every_record],
            "rocksdb_compact_filter": None if rocks is None else rocks.query_time_after_num_entries,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> StateTtlConfig:
        inc = data.get("incremental")
        rocks = data.get("rocksdb_compact_filter")
        strategies = CleanupStrategies(
            full_snapshot=bool(data.get("cleanup_full_snapshot")),
            incremental=None if inc is None else IncrementalCleanupStrategy(int(inc[0]), bool(inc[1])),
            rocksdb_compact_filter=None if rocks is None else RocksdbCompactFilterCleanupStrategy(int(rocks)),
            cleanup_in_background=bool(data.get("cleanup_in_background", True)),
        )
        return StateTtlConfig(
            int(data["ttl_ms"]),
            UpdateType[data["update_type"]],
            StateVisibility[data["state_visibility"]],
            TtlTimeCharacteristic[data.get("time_characteristic", "ProcessingTime")],
            strategies,
        )


# PyFlink spells the enums StateTtlConfig.UpdateType, StateTtlConfig.StateVisibility, ...
StateTtlConfig.UpdateType = UpdateType  # type: ignore[attr-defined]
StateTtlConfig.StateVisibility = StateVisibility  # type: ignore[attr-defined]
StateTtlConfig.TtlTimeCharacteristic = TtlTimeCharacteristic  # type: ignore[attr-defined]


class StateTtlConfigBuilder:
    """PyFlink's ``StateTtlConfig.Builder``."""

    def __init__(self, ttl: Any) -> None:
        self._config = StateTtlConfig(ttl_milliseconds(ttl))

    def _set(self, **changes: Any) -> StateTtlConfigBuilder:
        self._config = replace(self._config, **changes)
        return self

    def _set_cleanup(self, **changes: Any) -> StateTtlConfigBuilder:
        return self._set(cleanup_strategies=replace(self._config.cleanup_strategies, **changes))

    def set_update_type(self, update_type: UpdateType) -> StateTtlConfigBuilder:
        return self._set(update_type=UpdateType(update_type))

    def update_ttl_on_create_and_write(self) -> StateTtlConfigBuilder:
        return self._set(update_type=UpdateType.OnCreateAndWrite)

    def update_ttl_on_read_and_write(self) -> StateTtlConfigBuilder:
        return self._set(update_type=UpdateType.OnReadAndWrite)

    def set_state_visibility(self, state_visibility: StateVisibility) -> StateTtlConfigBuilder:
        return self._set(state_visibility=StateVisibility(state_visibility))

    def return_expired_if_not_cleaned_up(self) -> StateTtlConfigBuilder:
        return self._set(state_visibility=StateVisibility.ReturnExpiredIfNotCleanedUp)

    def never_return_expired(self) -> StateTtlConfigBuilder:
        return self._set(state_visibility=StateVisibility.NeverReturnExpired)

    def set_ttl(self, ttl: Any) -> StateTtlConfigBuilder:
        return self._set(ttl_ms=ttl_milliseconds(ttl))

    def set_ttl_time_characteristic(
        self, ttl_time_characteristic: TtlTimeCharacteristic
    ) -> StateTtlConfigBuilder:
        return self._set(time_characteristic=TtlTimeCharacteristic(ttl_time_characteristic))

    def use_processing_time(self) -> StateTtlConfigBuilder:
        return self._set(time_characteristic=TtlTimeCharacteristic.ProcessingTime)

    def use_event_time(self) -> StateTtlConfigBuilder:
        """Beyond Flink: "now" is the watermark set by ``backend.advance_watermark(ts)``."""
        return self._set(time_characteristic=TtlTimeCharacteristic.EventTime)

    def cleanup_full_snapshot(self) -> StateTtlConfigBuilder:
        return self._set_cleanup(full_snapshot=True)

    def cleanup_incrementally(
        self, cleanup_size: int, run_cleanup_for_every_record: bool = False
    ) -> StateTtlConfigBuilder:
        if type(cleanup_size) is not int or cleanup_size < 1:
            raise InvalidArgumentError(
                f"cleanup_size must be an int of at least 1, got {cleanup_size!r}",
                code="INVALID_TTL",
            )
        strategy = IncrementalCleanupStrategy(cleanup_size, bool(run_cleanup_for_every_record))
        return self._set_cleanup(incremental=strategy)

    def cleanup_in_rocksdb_compact_filter(self, query_time_after_num_entries: int) -> StateTtlConfigBuilder:
        if type(query_time_after_num_entries) is not int or query_time_after_num_entries < 1:
            raise InvalidArgumentError(
                "query_time_after_num_entries must be an int of at least 1, "
                f"got {query_time_after_num_entries!r}",
                code="INVALID_TTL",
            )
        strategy = RocksdbCompactFilterCleanupStrategy(query_time_after_num_entries)
        return self._set_cleanup(rocksdb_compact_filter=strategy)

    def disable_cleanup_in_background(self) -> StateTtlConfigBuilder:
        return self._set_cleanup(cleanup_in_background=False)

    def build(self) -> StateTtlConfig:
        return self._config


StateTtlConfig.Builder = StateTtlConfigBuilder  # type: ignore[attr-defined]
