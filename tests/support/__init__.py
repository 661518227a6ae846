"""What the test tiers share, in one place: the set-ups (``spark``: the tests' SparkSession and
Spark drivers in subprocesses; ``cluster``: a standalone Spark cluster on loopback, with ``procs``
to find and kill its processes; ``s3``: the loopback S3 server), the implementations every
contract suite of ``tests/contracts/`` runs on (``backends``: keyed backends; ``storages``:
memory, local, S3), and the folders of shared helper modules (``HELPERS``).

``tests/`` is on ``sys.path`` (pytest puts a ``conftest.py``'s folder there, and the drivers'
preamble does too), so this package imports as ``support``."""

from __future__ import annotations

import socket
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
"""The ``tests/`` folder."""

ROOT = TESTS.parent
"""The repository (``state/``, ``checkpoint/``, ``connector/``, ``cli/``, ``examples/``, ...)."""

HELPERS = (TESTS / "state", TESTS / "checkpoint", TESTS / "checkpoint" / "flink")
"""Folders whose modules tests in their subfolders import by name (models, jobs, operation
sequences): ``tests/conftest.py`` puts them on ``sys.path``, so a test imports the same module
wherever it sits and whichever tests run with it."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
