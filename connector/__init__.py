"""The PySpark data source ``flinkstate``: checkpoints as DataFrames and back."""

from __future__ import annotations

from typing import Any

from .source import FlinkStateDataSource

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, filter_pushdown: bool = True) -> None:
    """Register the data source on ``spark`` and set Python filter pushdown on (or off).

    Registration is needed only where discovery of the installed ``pyspark_flinkstate``
    module is off; reads work with pushdown off too, just without skipping key groups.
    With pushdown on, Spark 4.3 reuses the read planned for a pushed filter in later
    unfiltered scans of the same loaded DataFrame: load once per query (see README).
    """
    spark.dataSource.register(FlinkStateDataSource)
    spark.conf.set(PUSHDOWN_CONF, "true" if filter_pushdown else "false")


__all__ = ["PUSHDOWN_CONF", "FlinkStateDataSource", "register"]
