"""The PySpark data source ``flinkstate``: checkpoints as DataFrames and back."""

from __future__ import annotations

import warnings
from typing import Any

from . import needs_spark  # noqa: F401  (first: without PySpark, one clear error)
from .errors import ChangeFeedError, OptionError, ProcessError, RootNotSharedError
from .process import coprocess, foreach_batch, process, read_side_output
from .source import FlinkStateDataSource

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
_warned = False


class PushdownReuseWarning(UserWarning):
    """Spark 4.3 reuses a pushed-down read in later unfiltered scans of the same DataFrame."""


def register(spark: Any, filter_pushdown: bool = False) -> None:
    """Register the data source on ``spark``; Python filter pushdown stays off unless asked.

    Registration is needed only where discovery of the installed ``pyspark_flinkstate``
    module is off. Without pushdown every read is right; select keys with the read options
    ``keys``, ``keyGroups`` and ``subtasks``, which read only what they name. With
    ``filter_pushdown=True``, Spark 4.3 reuses the read planned for a pushed filter in later
    unfiltered scans of the same loaded DataFrame (wrong results; load once per query, see
    docs/spark/read.md), so turning it on warns once.
    """
    global _warned
    spark.dataSource.register(FlinkStateDataSource)
    spark.conf.set(PUSHDOWN_CONF, "true" if filter_pushdown else "false")
    if filter_pushdown and not _warned:
        _warned = True
        warnings.warn(
            "flinkstate: Python filter pushdown is on. Spark 4.3 reuses a pushed-down read in later "
            "unfiltered scans of the same loaded DataFrame: load once per query that filters on "
            "key, key_group or subtask, or select with the options keys/keyGroups/subtasks instead.",
            PushdownReuseWarning,
            stacklevel=2,
        )


__all__ = [
    "PUSHDOWN_CONF",
    "ChangeFeedError",
    "FlinkStateDataSource",
    "OptionError",
    "ProcessError",
    "PushdownReuseWarning",
    "RootNotSharedError",
    "coprocess",
    "foreach_batch",
    "process",
    "read_side_output",
    "register",
]
