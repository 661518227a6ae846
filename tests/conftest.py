"""Shared fixtures: a keyed-backend factory per implementation; contract suites run on all."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import pytest

from flinkstate.state import AbstractKeyedStateBackend, HeapKeyedStateBackend, RocksDBKeyedStateBackend

BackendFactory = Callable[..., AbstractKeyedStateBackend]


_SCRATCH = tempfile.TemporaryDirectory(prefix="flinkstate-tests-")
"""Where test backends' RocksDB directories go: removed when the test process exits, also
those of tests that do not remove their own."""


def rocksdb_backend(**kwargs: Any) -> RocksDBKeyedStateBackend:
    """A RocksDB backend in a fresh temporary directory (removed by ``make_backend``)."""
    return RocksDBKeyedStateBackend(tempfile.mkdtemp(prefix="rocksdb-", dir=_SCRATCH.name), **kwargs)


KEYED_BACKENDS = {
    "heap-cow": lambda **kw: HeapKeyedStateBackend(async_snapshots=True, **kw),
    "heap-nested": lambda **kw: HeapKeyedStateBackend(async_snapshots=False, **kw),
    "rocksdb": rocksdb_backend,
}


@pytest.fixture(params=sorted(KEYED_BACKENDS))
def make_backend(request: pytest.FixtureRequest) -> Any:
    """Builds keyed backends of one implementation; closes them after the test."""
    made: list[AbstractKeyedStateBackend] = []

    def factory(**kwargs: Any) -> AbstractKeyedStateBackend:
        backend = KEYED_BACKENDS[request.param](**kwargs)
        made.append(backend)
        return backend

    yield factory
    import shutil

    for backend in made:
        backend.close()
        if isinstance(backend, RocksDBKeyedStateBackend):
            shutil.rmtree(backend.path, ignore_errors=True)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def s3_server() -> Any:
    """A real HTTP S3 server (moto_server) on a free loopback port, for the whole session."""
    import shutil
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    binary = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.2)
    yield endpoint
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def s3_options(s3_server: str) -> dict[str, Any]:
    """Storage options for s3fs against the test server, with a fresh bucket per test."""
    import uuid

    import s3fs

    options = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": s3_server}}
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(**options).mkdir(bucket)
    return {"bucket": bucket, "options": options}


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
