"""State time-to-live: the config, clocks, and the decorator applied once at state creation.

The face of this package: the config with its enums, the clocks, and ``LONG_MIN`` (Flink's
``Long.MIN_VALUE``: the watermark before any)."""

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
from .time import (
    LONG_MIN,
    ManualTimeProvider,
    TtlTimeProvider,
    WallClockTimeProvider,
    WatermarkTimeProvider,
)

__all__ = [
    "LONG_MIN",
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
