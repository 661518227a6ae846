"""Process functions the harness and the Spark runner tests share, with plain-Python models."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

from flinkstate.state import (
    AggregateFunction,
    AggregatingStateDescriptor,
    KeyedBroadcastProcessFunction,
    KeyedProcessFunction,
    MapStateDescriptor,
    ReducingStateDescriptor,
    RuntimeContext,
    StateTtlConfig,
    TimeDomain,
    Types,
    ValueStateDescriptor,
)

GAP = 30


class WordCount(KeyedProcessFunction):
    """Emits (word, running count) for every element."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield ctx.get_current_key(), n


def word_count_model(words: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for w in words:
        out[w] = out.get(w, 0) + 1
    return out


def _session_descriptor() -> ValueStateDescriptor:
    desc = ValueStateDescriptor("session", Types.TUPLE([Types.LONG(), Types.LONG(), Types.LONG()]))
    desc.enable_time_to_live(
        StateTtlConfig.new_builder(timedelta(milliseconds=10 * GAP)).use_event_time().build()
    )
    return desc


SESSION = _session_descriptor()
"""(start, end, events) of a user's open session."""


class Sessions(KeyedProcessFunction):
    """Sessions of ``GAP`` ms of event time per user: (user, start, end, events) when one closes.

    The open session lives in a value state with event-time TTL (a session untouched for
    ``10 * GAP`` after the watermark is dropped); the timer at ``end + GAP`` closes it.
    """

    def open(self, runtime_context: RuntimeContext) -> None:
        self.session = runtime_context.get_state(SESSION)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        ts = ctx.timestamp()
        assert ts is not None
        current = self.session.value()
        timers = ctx.timer_service()
        if current is not None and ts <= current[1] + GAP:
            timers.delete_event_time_timer(current[1] + GAP)
            start, end, n = current[0], max(current[1], ts), current[2] + 1
        else:
            if current is not None:  # a late-closing session: emit it before starting anew
                timers.delete_event_time_timer(current[1] + GAP)
                yield ctx.get_current_key(), current[0], current[1], current[2]
            start, end, n = ts, ts, 1
        self.session.update((start, end, n))
        timers.register_event_time_timer(end + GAP)
        return

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        assert ctx.time_domain() is TimeDomain.EVENT_TIME
        current = self.session.value()
        if current is not None:
            yield ctx.get_current_key(), current[0], current[1], current[2]
            self.session.clear()


def sessions_model(events: Iterable[tuple[str, int]]) -> list[tuple[str, int, int, int]]:
    """Every session of the events (user, ts), each user's events in time order."""
    by_user: dict[str, list[int]] = {}
    for user, ts in events:
        by_user.setdefault(user, []).append(ts)
    out = []
    for user, stamps in by_user.items():
        stamps.sort()
        start = end = stamps[0]
        n = 1
        for ts in stamps[1:]:
            if ts <= end + GAP:
                end, n = ts, n + 1
            else:
                out.append((user, start, end, n))
                start = end = ts
                n = 1
        out.append((user, start, end, n))
    return sorted(out)


class Reminder(KeyedProcessFunction):
    """Processing time: a reminder ``delay`` ms after each key's first element."""

    def __init__(self, delay: int = 1000) -> None:
        self.delay = delay

    def open(self, runtime_context: RuntimeContext) -> None:
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", Types.LONG()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        if self.seen.value() is None:
            now = ctx.timer_service().current_processing_time()
            self.seen.update(now)
            ctx.timer_service().register_processing_time_timer(now + self.delay)
        yield from ()

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        assert ctx.time_domain() is TimeDomain.PROCESSING_TIME
        yield ctx.get_current_key(), timestamp


RULES = MapStateDescriptor("rules", Types.STRING(), Types.LONG())


class ThresholdAlerts(KeyedBroadcastProcessFunction):
    """Broadcast rules (word, threshold): an alert (word, count) when a word's count reaches
    its threshold; a rule update resets the counts of every word (apply_to_keyed_state)."""

    COUNT = ValueStateDescriptor("count", Types.LONG())

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(self.COUNT)

    def process_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext
    ) -> Iterator[Any]:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        threshold = ctx.get_broadcast_state(RULES).get(ctx.get_current_key())
        if threshold is not None and n == threshold:
            yield ctx.get_current_key(), n

    def process_broadcast_element(
        self, value: Any, ctx: KeyedBroadcastProcessFunction.Context
    ) -> Iterator[Any]:
        word, threshold = value
        ctx.get_broadcast_state(RULES).put(word, threshold)
        ctx.apply_to_keyed_state(self.COUNT, lambda key, state: state.clear())
        yield from ()


class Failing(KeyedProcessFunction):
    """Raises on the word "boom"."""

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        if ctx.get_current_key() == "boom":
            raise ValueError("boom is not a word")
        yield ctx.get_current_key(), 1


class ExitWorker(KeyedProcessFunction):
    """Ends its Python worker at the first element: the task dies outside flinkstate's code."""

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        import os

        os._exit(3)
        yield value


class FailFirstAttempt(WordCount):
    """Word count whose first task attempt fails at the word "w3" (``marker`` records it)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        import os

        if ctx.get_current_key() == "w3" and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write(str(os.getpid()))
            raise RuntimeError("injected failure of the first attempt")
        yield from super().process_element(value, ctx)


class TimerCount(KeyedProcessFunction):
    """Counts a key's elements and sets an event-time timer at each element's time; a timer
    emits (key, its time, the count when it fires): the count tells when the watermark moved."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.n = runtime_context.get_state(ValueStateDescriptor("n", Types.LONG()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        self.n.update((self.n.value() or 0) + 1)
        ts = ctx.timestamp()
        assert ts is not None
        ctx.timer_service().register_event_time_timer(ts)
        yield from ()

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        yield ctx.get_current_key(), timestamp, self.n.value()


class Mean(AggregateFunction):
    """The mean of ints, its accumulator (sum, count)."""

    def create_accumulator(self) -> tuple[int, int]:
        return 0, 0

    def add(self, value: int, accumulator: tuple[int, int]) -> tuple[int, int]:
        return accumulator[0] + value, accumulator[1] + 1

    def get_result(self, accumulator: tuple[int, int]) -> float:
        return accumulator[0] / accumulator[1]

    def merge(self, acc_a: tuple[int, int], acc_b: tuple[int, int]) -> tuple[int, int]:
        return acc_a[0] + acc_b[0], acc_a[1] + acc_b[1]


class Totals(KeyedProcessFunction):
    """For every element (a row with ``v``): (key, largest v so far, mean of v so far, this
    subtask's index, the number of subtasks), with reducing and aggregating state."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.largest = runtime_context.get_reducing_state(
            ReducingStateDescriptor("largest", max, Types.LONG())
        )
        accumulator = Types.TUPLE([Types.LONG(), Types.LONG()])
        self.mean = runtime_context.get_aggregating_state(
            AggregatingStateDescriptor("mean", Mean(), accumulator)
        )
        self.where = (
            runtime_context.get_index_of_this_subtask(),
            runtime_context.get_number_of_parallel_subtasks(),
        )

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        self.largest.add(value.v)
        self.mean.add(value.v)
        yield ctx.get_current_key(), self.largest.get(), self.mean.get(), *self.where


def totals_model(rows: Iterable[tuple[Any, int]]) -> list[tuple[Any, int, float]]:
    """(key, largest, mean) after every element of (key, v) rows, in order."""
    seen: dict[Any, list[int]] = {}
    out = []
    for key, v in rows:
        values = seen.setdefault(key, [])
        values.append(v)
        out.append((key, max(values), sum(values) / len(values)))
    return out


class Arrivals(KeyedProcessFunction):
    """(key, the element's ``i``, its position among the key's elements), for every element."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.n = runtime_context.get_state(ValueStateDescriptor("n", Types.LONG()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        yield ctx.get_current_key(), value.i, n


class LastEventTime(KeyedProcessFunction):
    """Keeps each key's last event time in a state with a one-day event-time TTL."""

    def open(self, runtime_context: RuntimeContext) -> None:
        desc = ValueStateDescriptor("last", Types.LONG())
        desc.enable_time_to_live(
            StateTtlConfig.new_builder(timedelta(days=1))
            .use_event_time()
            .disable_cleanup_in_background()
            .build()
        )
        self.last = runtime_context.get_state(desc)

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        self.last.update(ctx.timestamp())
        return iter(())


def stored_counts(root: Any, uid: str = "wc") -> dict[Any, int]:
    """The ``count`` state of operator ``uid`` in the latest checkpoint under ``root``."""
    from flinkstate.checkpoint import open_checkpoint

    checkpoint = open_checkpoint(str(root))
    p = checkpoint.operator(uid).parallelism
    out = {}
    for i in range(p):
        backend = checkpoint.keyed_backend(uid, i, p)
        state = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
        for key in list(backend.get_keys("count")):
            backend.set_current_key(key)
            out[key] = state.value()
    return out


class TaskInfo(KeyedProcessFunction):
    """Emits (key, the task's name with subtasks, the job parameter "env") per element."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.info = (
            runtime_context.get_task_name_with_subtasks(),
            runtime_context.get_job_parameter("env", "dev"),
        )

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        yield (ctx.get_current_key(), *self.info)


def rocksdb_write_buffer(path: str) -> int:
    """``write_buffer_size`` in the OPTIONS file RocksDB wrote for the backend at ``path``."""
    import re
    from pathlib import Path

    text = sorted(Path(path, "db").glob("OPTIONS-*"))[-1].read_text()
    found = re.search(r"^\s*write_buffer_size=(\d+)", text, re.M)
    assert found is not None, text
    return int(found.group(1))


class WriteBufferSeen(KeyedProcessFunction):
    """Emits (key, the write buffer size RocksDB was opened with) per element: its backend's
    options as they reached RocksDB on the executor."""

    def open(self, runtime_context: Any) -> None:
        self.size = rocksdb_write_buffer(runtime_context._op.backend.path)  # the task's backend

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        yield ctx.get_current_key(), self.size


class BatchLog:
    """A ``foreach_batch`` sink keeping each batch's output rows in a JSON-lines file: over
    Spark Connect a streaming query's sink runs in Spark's foreachBatch worker on the server,
    not in the test's process, so appending to a list there is lost."""

    def __init__(self, path: Any, sort: bool = False) -> None:
        self.path = str(path)
        self.sort = sort

    def __call__(self, out: Any, batch_id: int) -> None:
        import json

        rows = [list(r) for r in out.collect()]
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(json.dumps([batch_id, sorted(rows) if self.sort else rows]) + "\n")

    def batches(self) -> list[tuple[int, list[tuple[Any, ...]]]]:
        """``(batch id, rows)`` per batch handed to the sink, in order."""
        import json
        import os

        if not os.path.exists(self.path):
            return []
        with open(self.path, encoding="utf-8") as file:
            return [(b, [tuple(r) for r in rows]) for b, rows in map(json.loads, file)]


class TimerLog(KeyedProcessFunction):
    """Registers nothing; each timer that fires emits (key, its time, its time domain, the
    watermark when it fired)."""

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        return iter(())

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterator[Any]:
        yield (
            ctx.get_current_key(),
            timestamp,
            ctx.time_domain().name,
            ctx.timer_service().current_watermark(),
        )
