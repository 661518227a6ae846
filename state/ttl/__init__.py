"""State time-to-live: the config, clocks, and the decorator applied once at state creation."""

from .config import (
    CleanupStrategies,
    IncrementalCleanupStrategy,
    RocksdbCompactFilterCleanupStrategy,
    StateTtlConfig,
    StateVisibility,
    Time,
    TtlTimeCharacteristic,
    UpdateType,
)
from .time import ManualTimeProvider, TtlTimeProvider, WallClockTimeProvider, WatermarkTimeProvider

__all__ = [
    "CleanupStrategies",
    "IncrementalCleanupStrategy",
    "ManualTimeProvider",
    "RocksdbCompactFilterCleanupStrategy",
    "StateTtlConfig",
    "StateVisibility",
    "Time",
    "TtlTimeCharacteristic",
    "TtlTimeProvider",
    "UpdateType",
    "WallClockTimeProvider",
    "WatermarkTimeProvider",
]
