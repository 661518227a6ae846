"""Checkpoint tests run on every storage: memory://, a local directory, and S3 (moto_server)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

STORAGES = ["memory", "local", "s3"]


@pytest.fixture(params=STORAGES)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """(root URL, storage options) of a fresh, empty location."""
    kind = request.param
    if kind == "memory":
        return f"memory://flinkstate-tests/{uuid.uuid4().hex}", {}
    if kind == "local":
        return str(tmp_path / "root"), {}
    request.applymarker(pytest.mark.s3)
    s3 = request.getfixturevalue("s3_options")
    return f"s3://{s3['bucket']}/root", s3["options"]
