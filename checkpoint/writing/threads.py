"""The process's checkpoint-writing threads, shared by every pending checkpoint."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any

from .writer import SubtaskResult


class _Writers:
    """The process's checkpoint-writing threads: started once, not per checkpoint, and
    handed work through a queue (starting a thread, or an executor's bookkeeping, costs
    more than a small increment's whole synchronous part). The futures a submit returns
    are made ahead, by the threads between jobs: building one (a condition, a lock, a
    deque) is, with cold caches, as dear as waking a thread."""

    SPARES = 4

    def __init__(self, threads: int) -> None:
        self._queue: SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = SimpleQueue()
        self._spares: list[Future[Any]] = [Future() for _ in range(self.SPARES)]
        for i in range(threads):
            threading.Thread(target=self._loop, name=f"checkpoint-writer-{i}", daemon=True).start()

    def submit(self, run: Callable[[], SubtaskResult]) -> Future[SubtaskResult]:
        try:
            future: Future[SubtaskResult] = self._spares.pop()
        except IndexError:  # more submits than spares since the threads last ran
            future = Future()
        self._queue.put((future, run))
        return future

    def _loop(self) -> None:
        while True:
            future, run = self._queue.get()
            if future.set_running_or_notify_cancel():
                try:
                    result = run()
                except BaseException as exc:  # delivered to whoever waits on the future
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, run
            while len(self._spares) < self.SPARES:
                self._spares.append(Future())


_WRITERS: _Writers | None = None


def _forget_writers() -> None:
    """In a forked child: it inherits the object, not its threads, and starts its own."""
    global _WRITERS
    _WRITERS = None


os.register_at_fork(after_in_child=_forget_writers)


def writers() -> _Writers:
    """The writer threads of this process, started on first use."""
    global _WRITERS
    pool = _WRITERS
    if pool is None:
        pool = _WRITERS = _Writers(threads=4)
    return pool
