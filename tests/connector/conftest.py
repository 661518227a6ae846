"""The Spark tier: one SparkSession for the whole test session (starting one takes 10+ s)."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark(pytestconfig: pytest.Config) -> Iterator[Any]:
    """The classic session, or with ``--connect`` a Spark Connect session on a local server
    (the two cannot share a process: a Connect session switches PySpark's functions to Connect),
    whose reads and writes find the data source by PySpark's discovery alone."""
    from pyspark.sql import SparkSession

    from flinkstate.connector import register

    connect = pytestconfig.getoption("connect")
    builder = SparkSession.builder.remote("local[2]") if connect else SparkSession.builder.master("local[2]")
    with warnings.catch_warnings():  # Connect starts its server with these, then warns it cannot set them
        warnings.filterwarnings("ignore", ".*CANNOT_MODIFY_CONFIG", UserWarning)
        session = (
            builder.appName("flinkstate-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.memory", "2g")
            .getOrCreate()
        )
    if not connect:
        session.sparkContext.setLogLevel("ERROR")
        register(session)  # Connect: the server discovers pyspark_flinkstate (register is tested there too)
    yield session
    session.stop()


@pytest.fixture
def pushdown(spark: Any) -> Iterator[Any]:
    """Python filter pushdown on for one test (the default registration leaves it off)."""
    from flinkstate.connector import PUSHDOWN_CONF

    spark.conf.set(PUSHDOWN_CONF, "true")
    yield spark
    spark.conf.set(PUSHDOWN_CONF, "false")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "connector" in str(item.fspath):
            item.add_marker(pytest.mark.spark)
