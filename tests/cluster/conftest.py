"""Fixtures of the cluster tier: one standalone cluster for the session (``spark_cluster``, a
``support.cluster.StandaloneCluster``).

A test runs its driver in a subprocess: ``spark_cluster.run_driver(body, *args)`` (to its end:
a ``DriverResult`` with ``returncode``, ``stdout``, ``stderr``) or ``start_driver`` (in the
background: a ``Driver``; ``wait()`` gives the result). ``body`` sees ``spark``, ``os``,
``sys`` and ``tests/`` on ``sys.path``. To kill a process mid-run: ``Worker.executors()``,
``Worker.python_workers()`` and ``support.procs`` (``executor_of``, ``kill``, ``wait_gone``);
``restart_worker(i)`` brings a killed Worker back. The loopback S3 server is the session's
``s3_server`` (``s3_options``: a fresh bucket per test), from ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.cluster import StandaloneCluster


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A Master and two Workers (one core, 2 GiB each) on 127.0.0.1, both registered; stopped
    (terminate, then kill, executors and Python workers too) at the end of the session."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2)
    yield cluster
    cluster.stop()
