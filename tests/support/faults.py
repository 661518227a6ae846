"""A fault-injecting HTTP proxy in front of the loopback S3 server.

Every request the storage stack sends goes through :class:`FaultProxy` to the real server
(``moto_server``); the proxy numbers the requests from 0 and answers the ones its
:class:`Faults` choose with a fault instead: ``500`` (InternalError), ``503`` (SlowDown),
``reset`` (the connection dropped before any answer), ``reset_body`` (half the real answer,
then the connection reset), ``truncate`` (the real headers, half the body, a clean close)
or ``delay`` (the real answer after ``delay`` seconds: longer than the client's read timeout).
"""

from __future__ import annotations

import http.client
import os
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

KINDS = ("500", "503", "reset", "reset_body", "truncate", "delay")
_ERRORS = {
    "500": (500, "InternalError", "We encountered an internal error. Please try again."),
    "503": (503, "SlowDown", "Please reduce your request rate."),
}
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade", "expect"}


@dataclass
class Faults:
    """Which requests fail and how: request ``at`` (or every one from ``at`` on when
    ``outage``), or each with probability ``fraction`` (seeded); ``kind`` one of :data:`KINDS`
    (``"mixed"``: each fault's kind drawn from them)."""

    kind: str = "500"
    at: int | None = None
    outage: bool = False
    fraction: float = 0.0
    seed: int = 0
    delay: float = 2.0
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def choose(self, index: int) -> str | None:
        """The fault of request ``index`` (``None``: answered as the server answers)."""
        hit = (
            (self.at is not None and (index == self.at or (self.outage and index > self.at)))
            or (self.fraction > 0 and self._rng.random() < self.fraction)
        )  # fmt: skip
        if not hit:
            return None
        return self._rng.choice(KINDS) if self.kind == "mixed" else self.kind


def cases(count: int, spread: int, delay: float) -> list[Faults]:
    """The faults to try on an operation of ``count`` requests: with ``FAULTS=all`` (``make
    faults``) every kind at every index; else ``spread`` indexes evenly apart (the last among
    them), one kind each, turning with the index; then an outage from the middle request on.
    ``delay``: how late a delayed answer comes."""
    if os.environ.get("FAULTS") == "all":
        found = [Faults(kind, at=i) for i in range(count) for kind in KINDS]
    else:
        step = max(1, count // max(spread, 1))
        chosen = sorted({*range(0, count, step), count - 1})
        found = [Faults(KINDS[n % len(KINDS)], at=i) for n, i in enumerate(chosen)]
    found.append(Faults("503", at=count // 2, outage=True))
    for case in found:
        case.delay = delay
    return found


def proxied(endpoint: str, read_timeout: float, outage: bool = False) -> dict[str, Any]:
    """s3fs options through the proxy at ``endpoint``: the default retries and ``read_timeout``;
    for an outage, one attempt a request (botocore's; s3fs's own few stay) so it gives up soon."""
    config: dict[str, Any] = {"read_timeout": read_timeout}
    if outage:
        config["retries"] = {"max_attempts": 1, "mode": "standard"}
    return {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": endpoint},
        "config_kwargs": config,
    }


def proxy_with_bucket() -> Iterator[FaultProxy]:
    """A fault proxy in front of a new S3 server, with a bucket on it (``proxy.bucket``), for a
    fixture to yield; both stop when it ends."""
    from .s3 import S3Server, new_bucket

    server = S3Server()
    proxy = FaultProxy(server.endpoint)
    proxy.bucket = new_bucket(server.endpoint)["bucket"]
    yield proxy
    proxy.stop()
    server.stop()


class FaultProxy:
    """The proxy: ``endpoint`` to give s3fs; ``faults`` (set any time) decides; ``requests``
    counts what it received, ``injected`` the faults it made (by kind)."""

    def __init__(self, upstream: str) -> None:
        target = urlsplit(upstream)
        self.upstream = (target.hostname or "127.0.0.1", target.port or 80)
        self.faults: Faults | None = None
        self.bucket = ""
        """A bucket on the server behind (:func:`proxy_with_bucket`)."""
        self.requests = 0
        self.injected: dict[str, int] = {}
        self.log: list[str] = []
        """Each request since :meth:`arm`: method and path."""
        self._lock = threading.Lock()
        proxy = self

        class Handler(_Handler):
            owner = proxy

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def arm(self, faults: Faults | None) -> None:
        """Count requests from 0 again under ``faults`` (``None``: no faults)."""
        with self._lock:
            self.faults, self.requests, self.log = faults, 0, []

    def next_fault(self, request: str) -> str | None:
        with self._lock:
            self.log.append(request)
            index = self.requests
            self.requests += 1
            kind = self.faults.choose(index) if self.faults is not None else None
            if kind is not None:
                self.injected[kind] = self.injected.get(kind, 0) + 1
            return kind

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that dropped its connection (its timeout, a reset): expected here


class _Handler(BaseHTTPRequestHandler):
    owner: FaultProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(*self.owner.upstream, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            conn.request(self.command, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            dropped = _HOP if self.command == "HEAD" else _HOP | {"content-length"}
            kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in dropped]
            return resp.status, resp.reason, kept, data
        finally:
            conn.close()

    def _reset(self) -> None:
        """Drop the connection with a TCP reset (no FIN: the client sees ECONNRESET)."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def _answer(
        self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes, cut: bool
    ) -> None:
        self.send_response_only(status, reason)
        for k, v in headers:
            self.send_header(k, v)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if cut:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
        else:
            self.wfile.write(data)

    def _handle(self) -> None:
        body = self._body()
        kind = self.owner.next_fault(f"{self.command} {self.path}")
        try:
            self._respond(body, kind)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (its timeout): nothing to answer

    def _respond(self, body: bytes, kind: str | None) -> None:
        if kind in _ERRORS:
            status, code, message = _ERRORS[kind]
            xml = f"<Error><Code>{code}</Code><Message>{message}</Message></Error>".encode()
            self._answer(status, code, [("Content-Type", "application/xml")], xml, False)
            return
        if kind == "reset":
            self._reset()
            return
        if kind == "delay":
            assert self.owner.faults is not None
            time.sleep(self.owner.faults.delay)
        status, reason, headers, data = self._forward(body)
        if kind == "reset_body" and data:
            self._answer(status, reason, headers, data, True)
            self._reset()
        elif kind == "truncate" and data:
            self._answer(status, reason, headers, data, True)
            self.close_connection = True
        else:
            self._answer(status, reason, headers, data, False)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle  # noqa: N815 - the base's names
