"""The examples of process functions (examples/process_*.py) run on the tests' session,
their results against plain-Python models."""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def example() -> Iterator[Callable[[str], ModuleType]]:
    """Imports an example module, its functions pickled by value (workers cannot import it)."""
    from pyspark import cloudpickle

    sys.path.insert(0, str(EXAMPLES))

    def load(name: str) -> ModuleType:
        module = importlib.import_module(name)
        cloudpickle.register_pickle_by_value(module)
        return module

    yield load
    sys.path.remove(str(EXAMPLES))


def test_each_process_example_has_a_test() -> None:
    tested = {
        "process_word_count",
        "process_sessions",
        "process_broadcast_rules",
        "process_harness",
        "process_orders_payments",
        "process_side_outputs",
    }
    assert {p.stem for p in EXAMPLES.glob("process_*.py")} == tested


def test_word_count(spark: Any, tmp_path: Path, example: Callable[[str], ModuleType]) -> None:
    result = example("process_word_count").main(str(tmp_path), spark)
    text = "to be or not to be that is the question"
    assert result["batch"] == dict(Counter(text.split() * 2))  # two runs over the same words
    counts: dict[str, list[int]] = {}
    for _, rows in result["stream"]:
        for word, n in rows:
            counts.setdefault(word, []).append(n)
    assert {w: sorted(ns) for w, ns in counts.items()} == {
        w: list(range(1, n + 1)) for w, n in Counter(f"{text} to do is to be".split()).items()
    }


def sessions_model(clicks: list[tuple[str, int]], gap: int) -> list[tuple[str, int, int, int]]:
    out = []
    for user in {u for u, _ in clicks}:
        stamps = sorted(t for u, t in clicks if u == user)
        start = end = stamps[0]
        n = 1
        for ts in stamps[1:]:
            if ts <= end + gap:
                end, n = ts, n + 1
            else:
                out.append((user, start, end, n))
                start, end, n = ts, ts, 1
        out.append((user, start, end, n))
    return sorted(out)


def test_sessions(spark: Any, tmp_path: Path, example: Callable[[str], ModuleType]) -> None:
    module = example("process_sessions")
    result = module.main(str(tmp_path), spark)
    assert sorted(result["sessions"]) == sessions_model(result["clicks"], module.GAP)
    assert len(result["clicks"]) == 400


def test_broadcast_rules(spark: Any, tmp_path: Path, example: Callable[[str], ModuleType]) -> None:
    result = example("process_broadcast_rules").main(str(tmp_path), spark)
    assert result["alerts"] == [("a", 3), ("c", 2)]  # "a b a c a b c c c a": a's 3rd, c's 2nd
    assert {row[-2:] for row in result["rules"]} == {("a", 3), ("c", 2)}


def test_harness(example: Callable[[str], ModuleType]) -> None:
    steps = example("process_harness").main()
    assert steps["elements"] == [("larger", "ann", 25)]
    assert steps["after the watermark"] == []  # ann's minute had ended: 30 is a new start
    hour = 3_600_000
    reminders = steps["subtask 0 at one hour"] + steps["subtask 1 at one hour"]
    assert sorted(reminders) == [("reminder", "ann", hour), ("reminder", "bob", hour)]


def test_orders_payments(spark: Any, tmp_path: Path, example: Callable[[str], ModuleType]) -> None:
    result = example("process_orders_payments").main(str(tmp_path), spark)
    assert result["run 1"] == [("o1", "paid", 30, 30)]  # o2 and o3 are still within their time
    # o2's late payment covers it; o4's order moves event time past o3's timeout
    assert result["run 2"] == [("o2", "paid", 50, 50), ("o3", "unpaid", 20, 5), ("o4", "paid", 10, 10)]


def test_side_outputs(spark: Any, tmp_path: Path, example: Callable[[str], ModuleType]) -> None:
    result = example("process_side_outputs").main(str(tmp_path / "c"), spark)
    harness, on_spark = result["harness"], result["spark"]
    assert harness["late"] == [("s2", 2000, 6.0)]  # the second run's reading behind the watermark
    assert harness["jumps"] == ["s1: 21.0 -> 35.5", "s2: 4.0 -> 30.0"]
    # Spark's second run committed what the harness emitted after the first run's five
    assert sorted(on_spark["output"]) == sorted(harness["output"][5:])
    assert on_spark["late"] == harness["late"]
    assert on_spark["jumps"] == harness["jumps"][1:]
