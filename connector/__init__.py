"""The PySpark data source ``flinkstate``: checkpoints as DataFrames and back."""

from __future__ import annotations

from typing import Any

from .source import FlinkStateDataSource

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any) -> None:
    """Register the data source on ``spark`` and turn on Python filter pushdown.

    Needed only where discovery of the installed ``pyspark_flinkstate`` module is off;
    reads work with pushdown off too, just without skipping key groups.
    """
    spark.dataSource.register(FlinkStateDataSource)
    spark.conf.set(PUSHDOWN_CONF, "true")


__all__ = ["PUSHDOWN_CONF", "FlinkStateDataSource", "register"]
