"""Filter pushdown, one rule for every reader (our checkpoints, the change feed, Flink's savepoints).

A reader accepts the filters it applies itself, exactly (Spark drops accepted filters from
its plan), and leaves every other one to Spark:

- on ``key_group`` (keyed state): integer range, equality and IN filters, which select key groups;
- on ``key`` (keyed state): equality and IN with values of the key's Python type, for key types
  whose Spark ``=`` is key equality (not FLOAT/DOUBLE: Spark has -0.0 = 0.0 and NaN = NaN, while
  those are distinct keys in distinct key groups); they select keys, and through their key
  groups the files and row groups read;
- on ``subtask`` (operator state with a ``subtask`` column): integer filters, which select subtasks.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, TypeGuard

from pyspark.sql.datasource import (
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from flinkstate.state.types import BasicTypeInfo

Predicate = Callable[[int], bool]
_RANGE_FILTERS = (EqualTo, In, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)


def int_predicate(f: Filter) -> Predicate | None:
    """A predicate for an equality/IN/range filter of integers (``None``: not such a filter)."""
    if not isinstance(f, _RANGE_FILTERS):
        return None
    values = f.value if isinstance(f, In) else (f.value,)
    if not all(type(v) is int for v in values):
        return None
    if isinstance(f, EqualTo):
        return lambda v: bool(v == f.value)
    if isinstance(f, In):
        members = set(f.value)
        return lambda v: v in members
    if isinstance(f, GreaterThan):
        return lambda v: bool(v > f.value)
    if isinstance(f, GreaterThanOrEqual):
        return lambda v: bool(v >= f.value)
    if isinstance(f, LessThan):
        return lambda v: bool(v < f.value)
    return lambda v: bool(v <= f.value)


def pushable_key_type(key_type: Any) -> TypeGuard[BasicTypeInfo]:
    """Whether Spark's ``=`` on keys of ``key_type`` is key equality (see the module docstring)."""
    return isinstance(key_type, BasicTypeInfo) and key_type.name not in ("FLOAT", "DOUBLE")


class Pushdown:
    """The filters one reader accepted: what it must apply, and what they select.

    ``keyed``: the view is a keyed state's; ``key_type``: its key type when a key filter may
    prune key groups (else key filters are left to Spark); ``subtasks``: the view has a
    ``subtask`` column the reader filters.
    """

    def __init__(self, *, keyed: bool, key_type: Any = None, subtasks: bool = False) -> None:
        self.keyed = keyed
        self.key_type = key_type if keyed and pushable_key_type(key_type) else None
        self.subtask_column = subtasks
        self.key_groups: list[Predicate] = []
        self.subtasks: list[Predicate] = []
        self.key_sets: list[set[Any]] = []

    def push(self, filters: list[Filter]) -> list[Filter]:
        """Record the filters applied here; return the rest (Spark evaluates them)."""
        rejected = []
        for f in filters:
            attribute: tuple[str, ...] = getattr(f, "attribute", ())
            column = attribute[0] if len(attribute) == 1 else None
            predicate = int_predicate(f)
            if self.keyed and column == "key_group" and predicate is not None:
                self.key_groups.append(predicate)
            elif self.keyed and column == "key" and self._key_filter(f):
                pass
            elif self.subtask_column and column == "subtask" and predicate is not None:
                self.subtasks.append(predicate)
            else:
                rejected.append(f)
        return rejected

    def _key_filter(self, f: Filter) -> bool:
        if self.key_type is None or not isinstance(f, EqualTo | In):
            return False
        values = set(f.value) if isinstance(f, In) else {f.value}
        if any(v is None or not isinstance(v, self.key_type.python_type) for v in values):
            return False
        self.key_sets.append(values)
        return True

    def keys(self, selected: Sequence[Any] | None) -> list[Any] | None:
        """The keys both the pushed key filters and ``selected`` (the ``keys`` option) allow
        (``None``: any). Selected keys are kept as given (never put in a set, which would
        merge distinct float keys); pushed keys are never floats, so ``in`` is key equality."""
        if not self.key_sets:
            return None if selected is None else list(selected)
        common = set.intersection(*self.key_sets)
        return list(common) if selected is None else [k for k in selected if k in common]

    def subtask_allowed(self, subtask: int) -> bool:
        return all(p(subtask) for p in self.subtasks)

    def wanted_key_groups(
        self,
        max_parallelism: int,
        keys: Iterable[Any] | None,
        group_of: Callable[[Any], int | None],
        selected: Collection[int] | None,
    ) -> set[int] | None:
        """Key groups to read (``None``: all): those of ``keys`` (``group_of`` gives a key's
        group, ``None`` when it cannot tell, and raises ValueError/TypeError for a key of
        another type, which matches no row), within the pushed ``key_group`` filters and the
        ``selected`` key groups (the ``keyGroups``/``keys``/``subtasks`` options)."""
        wanted: set[int] | None = None
        if keys is not None:
            wanted = set()
            for key in keys:
                try:
                    group = group_of(key)
                except (ValueError, TypeError):
                    continue
                if group is None:
                    wanted = None
                    break
                wanted.add(group)
        if self.key_groups:
            allowed = {g for g in range(max_parallelism) if all(p(g) for p in self.key_groups)}
            wanted = allowed if wanted is None else wanted & allowed
        if selected is not None:
            wanted = set(selected) if wanted is None else wanted & set(selected)
        return wanted

    def install(self, reader: DataSourceReader) -> None:
        """Make ``reader.pushFilters`` call :meth:`push`. Spark's guard refuses readers that
        define pushFilters while pushdown is off; ours apply accepted filters exactly and are
        correct without pushdown too, so the method is set per instance, where the guard does
        not look (see docs/spark/read.md)."""
        reader.pushFilters = _PushFilters(self)  # type: ignore[method-assign]


class _PushFilters:
    """``reader.pushFilters`` as Spark calls it; looks like the base method to its guard."""

    def __init__(self, pushdown: Pushdown) -> None:
        self._pushdown = pushdown
        self.__func__ = DataSourceReader.pushFilters

    def __call__(self, filters: list[Filter]) -> Iterable[Filter]:
        return self._pushdown.push(filters)
