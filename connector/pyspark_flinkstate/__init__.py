"""Discovered by PySpark (every installed ``pyspark_*`` module): makes ``format("flinkstate")`` work."""

from flinkstate.connector.source import FlinkStateDataSource as DefaultSource

__all__ = ["DefaultSource"]
