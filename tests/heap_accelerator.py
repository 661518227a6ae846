"""What the tests of the heap tables' C accelerator share: each function run as its Python
model and as its C version (skipped where the accelerator is not built), and keys that
probe a dict's edge cases."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
from typing import Any

import pytest

from flinkstate.state.heap.state_map import _tables

NO_C = "the C accelerator is not built here (no compiler at install): its Python fallback is tested"

Table = list[dict[Any, Any] | None]
Point = namedtuple("Point", "x y")


def implementations(model: Callable[..., Any], name: str) -> list[Any]:
    """Parameters running a test on ``model`` (Python) and on the C function ``name``."""
    return [
        pytest.param(model, id="python"),
        pytest.param(
            None if _tables is None else getattr(_tables, name),
            id="c",
            marks=pytest.mark.skipif(_tables is None, reason=NO_C),
        ),
    ]


class Collide:
    """Equal by name; every instance hashes alike (one bucket, dict probing on equality)."""

    def __init__(self, name: str, h: int = -7) -> None:
        self.name, self.h = name, h

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Collide) and other.name == self.name
