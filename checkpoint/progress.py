"""Progress of long work, reported to an optional ``progress(done, total)`` hook (what the
command line draws its bars with)."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int], None]


def progress_steps(progress: Progress | None, total: int) -> Callable[[], None]:
    """Report ``0`` of ``total`` now; the returned ``step()`` reports one more done."""
    done = 0

    def step() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    if progress is not None:
        progress(0, total)
    return step
