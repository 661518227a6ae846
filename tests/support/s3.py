"""The loopback S3 server: a real HTTP S3 server (``moto_server``) on a free port of 127.0.0.1,
and buckets on it. No live network: s3fs talks to it by ``client_kwargs.endpoint_url``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from . import free_port


class S3Server:
    """A ``moto_server`` process, answering at ``endpoint`` once built; ``stop`` ends it."""

    def __init__(self, timeout: float = 30) -> None:
        binary = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
        port = free_port()
        self.process = subprocess.Popen(
            [binary, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(self.endpoint, timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.process.kill()
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def options(endpoint: str, key: str = "testing", secret: str = "testing") -> dict[str, Any]:
    """Storage options for s3fs against the server at ``endpoint`` (moto accepts any credentials)."""
    return {"key": key, "secret": secret, "client_kwargs": {"endpoint_url": endpoint}}


def new_bucket(endpoint: str, name: str | None = None, **credentials: str) -> dict[str, Any]:
    """A new bucket (default: a random name) on the server: ``{"bucket": name, "options": ...}``."""
    import s3fs

    found = options(endpoint, **credentials)
    bucket = name or f"t-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(**found).mkdir(bucket)
    return {"bucket": bucket, "options": found}
