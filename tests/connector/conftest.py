"""The Spark tier: one SparkSession for the whole test session (starting one takes 10+ s)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from support.spark import session as spark_session

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark(pytestconfig: pytest.Config) -> Iterator[Any]:
    """The classic session, or with ``--connect`` a Spark Connect session (``support.spark.session``)."""
    session = spark_session(connect=pytestconfig.getoption("connect"))
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
