"""Fixtures of the cluster tier: one standalone cluster for the session (``spark_cluster``).

The loopback S3 server is the session's ``s3_server`` (``s3_options``: a fresh bucket per
test), from ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .standalone import StandaloneCluster


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A Master and two Workers (one core, 2 GiB each) on 127.0.0.1, both registered; stopped
    (terminate, then kill, executors and Python workers too) at the end of the session."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2)
    yield cluster
    cluster.stop()
