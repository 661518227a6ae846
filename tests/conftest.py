"""Shared fixtures: the implementations the contract suites (``tests/contracts/``) run on, as
fixtures any test can take: ``make_backend`` (every keyed backend) and ``location`` (every
storage: memory, local, S3); the loopback S3 server; ``--connect``. The set-ups themselves are
in ``tests/support/``."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import HELPERS, backends, s3, storages

from flinkstate.state import AbstractKeyedStateBackend, RocksDBKeyedStateBackend

for _folder in HELPERS:
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))


@pytest.fixture(params=sorted(backends.KEYED_BACKENDS))
def make_backend(request: pytest.FixtureRequest) -> Iterator[backends.BackendFactory]:
    """Builds keyed backends of one implementation; closes them after the test."""
    made: list[AbstractKeyedStateBackend] = []

    def factory(**kwargs: Any) -> AbstractKeyedStateBackend:
        backend = backends.KEYED_BACKENDS[request.param](**kwargs)
        made.append(backend)
        return backend

    yield factory
    for backend in made:
        backend.close()
        if isinstance(backend, RocksDBKeyedStateBackend):
            shutil.rmtree(backend.path, ignore_errors=True)


@pytest.fixture(params=storages.STORAGES)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> storages.Location:
    """(root URL, storage options) of a fresh, empty location on one storage."""
    kind = request.param
    if kind == "memory":
        return storages.memory_location()
    if kind == "local":
        return storages.local_location(tmp_path)
    request.applymarker(pytest.mark.s3)
    return storages.s3_location(request.getfixturevalue("s3_options"))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A real HTTP S3 server (moto_server) on a free loopback port, for the whole session."""
    server = s3.S3Server()
    yield server.endpoint
    server.stop()


@pytest.fixture
def s3_options(s3_server: str) -> dict[str, Any]:
    """Storage options for s3fs against the test server, with a fresh bucket per test."""
    return s3.new_bucket(s3_server)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--connect",
        action="store_true",
        help="run only the tests marked connect, on a Spark Connect session (a local Connect server)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every S3 case ``s3`` at collection time, so ``-m "not s3"`` deselects them all;
    with ``--connect``, keep only the tests marked ``connect``."""
    if config.getoption("connect"):
        kept = [item for item in items if item.get_closest_marker("connect") is not None]
        dropped = [item for item in items if item.get_closest_marker("connect") is None]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        uses_s3 = "s3" in params.values() or {"s3_server", "s3_options"} & set(
            getattr(item, "fixturenames", ())
        )
        if uses_s3:
            item.add_marker(pytest.mark.s3)
