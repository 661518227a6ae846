"""A keyed running count over a generated stream, on the heap backend.

Each event is (user, page). Per user: a ValueState counting events, a MapState counting
pages, a ListState of the last pages seen. Run: ``python examples/running_count.py``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
)

USERS = [f"user-{i}" for i in range(8)]
PAGES = ["home", "search", "cart", "checkout"]


def events(n: int, seed: int = 7) -> Iterator[tuple[str, str]]:
    rnd = random.Random(seed)
    for _ in range(n):
        yield rnd.choice(USERS), rnd.choice(PAGES)


def run(n_events: int = 10_000) -> HeapKeyedStateBackend:
    backend = HeapKeyedStateBackend(key_type=Types.STRING(), max_parallelism=128)
    count = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
    pages = backend.get_map_state(MapStateDescriptor("pages", Types.STRING(), Types.LONG()))
    recent = backend.get_list_state(ListStateDescriptor("recent", Types.STRING()))
    for user, page in events(n_events):
        backend.set_current_key(user)
        count.update((count.value() or 0) + 1)
        pages.put(page, (pages.get(page) or 0) + 1)
        last = list(recent.get())[-2:]
        recent.update([*last, page])
    return backend


def show(backend: HeapKeyedStateBackend) -> None:
    count = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
    pages = backend.get_map_state(MapStateDescriptor("pages", Types.STRING(), Types.LONG()))
    recent = backend.get_list_state(ListStateDescriptor("recent", Types.STRING()))
    print(f"{'user':<8} {'kg':>3} {'count':>6}  pages{'':<40} recent")
    for user in sorted(backend.get_keys("count")):
        backend.set_current_key(user)
        page_counts = ", ".join(f"{p}={c}" for p, c in sorted(pages.items()))
        print(
            f"{user:<8} {backend.get_current_key_group():>3} {count.value():>6}  "
            f"{page_counts:<45} {list(recent.get())}"
        )


if __name__ == "__main__":
    show(run())
