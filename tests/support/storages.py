"""The storages every storage test runs on (``location``, the fixture of ``tests/conftest.py``;
the contract: ``tests/contracts/test_storage.py``): ``memory://``, a local directory, and S3 on
the loopback server (:mod:`.s3`)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

STORAGES = ["memory", "local", "s3"]

Location = tuple[str, dict[str, Any]]
"""(root URL, storage options)."""


def memory_location() -> Location:
    """A fresh, empty root on ``memory://`` (a unique folder of fsspec's one memory store)."""
    return f"memory://flinkstate-tests/{uuid.uuid4().hex}", {}


def local_location(tmp_path: Path) -> Location:
    """A fresh, empty root in the test's directory."""
    return str(tmp_path / "root"), {}


def s3_location(bucket: dict[str, Any]) -> Location:
    """A fresh, empty root in a new bucket (:func:`.s3.new_bucket`)."""
    return f"s3://{bucket['bucket']}/root", bucket["options"]


def fs_options(options: dict[str, Any], prefix: str = "fs.") -> dict[str, str]:
    """Storage options as the data source's ``fs.*`` options (nested keys joined by dots, every
    value a string, as Spark passes them): ``{"client_kwargs": {"endpoint_url": u}}`` ->
    ``{"fs.client_kwargs.endpoint_url": u}``."""
    out: dict[str, str] = {}
    for key, value in options.items():
        if isinstance(value, dict):
            out |= fs_options(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = str(value)
    return out
