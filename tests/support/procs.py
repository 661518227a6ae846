"""Processes from ``/proc`` (Linux; no ps, no psutil): parents, children, command lines, and
the Spark processes a test kills (an executor JVM, its Python workers)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
PYTHON_WORKER_MODULES = ("pyspark.daemon", "pyspark.worker")


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state is [0], ppid [1])."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return text[text.rindex(")") + 2 :].split()


def ppid(pid: int) -> int | None:
    """The parent of ``pid`` (None: gone)."""
    fields = _stat(pid)
    return int(fields[1]) if fields else None


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot): with the pid, names one process for good."""
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def cmdline(pid: int) -> list[str]:
    """The arguments of ``pid`` ([] when gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def children(pid: int) -> list[int]:
    """The live child processes of ``pid``."""
    return [p for p in _pids() if ppid(p) == pid and alive(p)]


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``, parents before children."""
    parents: dict[int, list[int]] = {}
    for p in _pids():
        parent = ppid(p)
        if parent is not None and alive(p):
            parents.setdefault(parent, []).append(p)
    out: list[int] = []
    todo = list(parents.get(pid, []))
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(parents.get(p, []))
    return out


def ancestors(pid: int) -> list[int]:
    """The parent of ``pid``, its parent, ... up to init."""
    out: list[int] = []
    parent = ppid(pid)
    while parent and parent not in out:
        out.append(parent)
        parent = ppid(parent)
    return out


def is_executor(pid: int) -> bool:
    """Whether ``pid`` is an executor JVM (``CoarseGrainedExecutorBackend``)."""
    return EXECUTOR_CLASS in cmdline(pid)


def is_python_worker(pid: int) -> bool:
    """Whether ``pid`` runs ``pyspark.daemon`` or ``pyspark.worker`` (a forked worker keeps
    the daemon's command line)."""
    args = cmdline(pid)
    return any(module in args for module in PYTHON_WORKER_MODULES)


def executor_of(pid: int) -> int:
    """The executor JVM above the Python worker ``pid``."""
    for parent in ancestors(pid):
        if is_executor(parent):
            return parent
    raise LookupError(f"process {pid} ({cmdline(pid)[:3]}) runs under no executor JVM")


def kill(pids: Iterable[int], sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to each of ``pids`` still there."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def wait_gone(pids: Iterable[int], timeout: float) -> list[int]:
    """Wait up to ``timeout`` s for ``pids`` to end; return those still alive."""
    left = list(pids)
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [p for p in left if alive(p)]
    return left
