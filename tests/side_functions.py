"""Process functions with side outputs, shared by the harness and Spark tests, with a
plain-Python model of what each output gets."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from flinkstate.state import KeyedProcessFunction, OutputTag, RuntimeContext, Types, ValueStateDescriptor

LONG_WORDS = OutputTag("long wörds", Types.STRING())
"""Words longer than four characters (an atomic type: one column ``value``)."""
MILESTONES = OutputTag(
    "milestones", Types.ROW_NAMED(["word", "count", "note"], [Types.STRING(), Types.LONG(), Types.STRING()])
)
"""Every second count of a word, with a note on every fourth (``None`` otherwise)."""


class Milestones(KeyedProcessFunction):
    """Word count (main output: (word, count)) with two side outputs."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        word = ctx.get_current_key()
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield word, n
        if len(word) > 4:
            yield LONG_WORDS, word
        if n % 2 == 0:
            yield MILESTONES, (word, n, None if n % 4 else f"{word} → {n}")


def milestones_model(
    words: Iterable[str], counts: dict[str, int] | None = None
) -> tuple[list[tuple[str, int]], dict[str, list[Any]]]:
    """The main rows and each side output's values of :class:`Milestones` over ``words``
    (continuing from ``counts``), in input order."""
    seen = dict(counts or {})
    main: list[tuple[str, int]] = []
    side: dict[str, list[Any]] = {LONG_WORDS.tag_id: [], MILESTONES.tag_id: []}
    for w in words:
        seen[w] = n = seen.get(w, 0) + 1
        main.append((w, n))
        if len(w) > 4:
            side[LONG_WORDS.tag_id].append(w)
        if n % 2 == 0:
            side[MILESTONES.tag_id].append((w, n, None if n % 4 else f"{w} → {n}"))
    return main, side


class YieldsTo(KeyedProcessFunction):
    """Yields ``(tag, value)`` for every element (and no main row)."""

    def __init__(self, tag: OutputTag, value: Any) -> None:
        self.tag = tag
        self.value = value

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        yield self.tag, self.value


class MilestonesFailFirstAttempt(Milestones):
    """:class:`Milestones` whose first task attempt fails at ``word`` after yielding to
    both side outputs (``marker`` records the failure)."""

    def __init__(self, marker: str, word: str) -> None:
        self.marker = marker
        self.word = word

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterator[Any]:
        import os

        yield from super().process_element(value, ctx)
        if ctx.get_current_key() == self.word and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write(str(os.getpid()))
            raise RuntimeError("injected failure of the first attempt")
