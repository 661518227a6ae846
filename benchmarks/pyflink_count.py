"""P11F's job: PyFlink's own keyed running count (a ``KeyedProcessFunction`` with a
``ValueState``), run by the Flink virtualenv's Python (``apache-flink`` is not a dependency
of ours).

Usage: python pyflink_count.py <records> <keys> <out.json>. Keys are ``i % keys`` of a
number sequence, two subtasks, the heap backend, with every key's state in PyFlink's
Python-side cache (its default of 1000 entries would make most reads a round trip to the
JVM). Each key's count is emitted once, when it reaches its last element
(``records / keys``), as P11 emits once per key. Each subtask notes when its function saw
its first and last element, so the rate excludes the mini-cluster's start-up and the job's
set-up (generous to PyFlink); the whole job's wall time is noted too.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor


class RunningCount(KeyedProcessFunction):  # type: ignore[misc]
    def __init__(self, per_key: int, notes: str) -> None:
        self.per_key = per_key
        self.notes = notes

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.first = self.last = 0.0
        self.seen = 0

    def process_element(self, value: int, ctx: KeyedProcessFunction.Context) -> Any:
        now = time.perf_counter()
        if not self.seen:
            self.first = now
        self.last = now
        self.seen += 1
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if n == self.per_key:
            yield ctx.get_current_key(), n

    def close(self) -> None:
        note = {"first": self.first, "last": self.last, "seen": self.seen}
        Path(self.notes, f"subtask-{self.subtask}.json").write_text(json.dumps(note))


def main(records: int, keys: int, out: str) -> None:
    conf = Configuration()
    conf.set_string("python.executable", sys.executable)
    conf.set_string("python.client.executable", sys.executable)
    conf.set_string("state.backend.type", "hashmap")
    conf.set_string("python.state.cache-size", str(keys))  # every key's state cached in Python, as ours
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    notes = tempfile.mkdtemp(prefix="p11f-")
    numbers = env.from_source(
        NumberSequenceSource(0, records - 1), WatermarkStrategy.no_watermarks(), "numbers"
    )
    counts = numbers.key_by(lambda i: i % keys, key_type=Types.LONG()).process(
        RunningCount(records // keys, notes), output_type=Types.TUPLE([Types.LONG(), Types.LONG()])
    )
    start = time.perf_counter()
    with counts.execute_and_collect("p11f") as results:
        emitted = dict(results)
    wall = time.perf_counter() - start
    if emitted != {k: records // keys for k in range(keys)}:
        raise SystemExit(f"PyFlink's counts are wrong: {len(emitted)} keys emitted")
    subtasks = [json.loads(p.read_text()) for p in Path(notes).glob("subtask-*.json")]
    seen = sum(s["seen"] for s in subtasks)
    if seen != records:
        raise SystemExit(f"the subtasks saw {seen} records, not {records}")
    busy = max(s["last"] for s in subtasks) - min(s["first"] for s in subtasks if s["seen"])
    Path(out).write_text(json.dumps({"records": records, "seconds": busy, "wall": wall}))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
