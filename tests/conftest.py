"""Shared fixtures: a keyed-backend factory per implementation; contract suites run on all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from flinkstate.state import AbstractKeyedStateBackend, HeapKeyedStateBackend

BackendFactory = Callable[..., AbstractKeyedStateBackend]

KEYED_BACKENDS = {
    "heap-cow": lambda **kw: HeapKeyedStateBackend(async_snapshots=True, **kw),
    "heap-nested": lambda **kw: HeapKeyedStateBackend(async_snapshots=False, **kw),
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
    for backend in made:
        backend.close()
