"""A state's difference between two snapshots, streamed unit by unit.

A key lands in group ``h % max_parallelism`` of each side (``h`` its murmur-hashed hash code),
so with max parallelisms ``m`` and ``n`` a key's groups agree modulo ``d = gcd(m, n)``: the unit
of comparison is a residue modulo ``d``, the old side's groups and the new side's of that residue
(one key group when ``m == n``; a rescaled max parallelism compares by key all the same, ``n / d``
groups at a time). A key group whose files are the same on both sides (path and SHA-256: an
incremental chain's shared files) is skipped unread, where expiry hides the same entries on both.
Rows compare by :func:`.scopes.scope_diff`; TTL timestamps only with ``compare_ttl``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from flinkstate.state import FlinkStateError, InvalidArgumentError
from flinkstate.state.descriptors import StateKind

from ..errors import CheckpointNotFoundError, SnapshotDiffError
from ..reading.keys import check_ids_below, key_groups_of, keys_of_type
from .scopes import ScopeDiff, element_diff, scope_diff
from .sides import KeyedSide, Side, StateName

READ_UNITS = 16
"""Units read per request to a side (one request per unit would open a Flink stream per group)."""
TTL_COLUMN = "ttl_timestamp"


@dataclass(frozen=True)
class DiffSettings:
    """What is compared: ``keys`` (JSON-decoded, typed per side) and ``key_groups`` (numbered by
    the common max parallelism) narrow it; expired entries are hidden unless ``include_expired``."""

    keys: tuple[Any, ...] | None = None
    key_groups: frozenset[int] | None = None
    compare_ttl: bool = False
    include_expired: bool = False

    @property
    def ignored(self) -> tuple[str, ...]:
        return () if self.compare_ttl else (TTL_COLUMN,)


@dataclass(frozen=True)
class KeyedDiff:
    """One keyed state's diff, planned: the units to compare and the key groups each side reads."""

    old: Side
    new: Side
    operator: str
    state: str
    old_state: KeyedSide
    new_state: KeyedSide
    modulus: int
    units: tuple[int, ...]
    old_groups: frozenset[int]
    new_groups: frozenset[int]
    old_keys: tuple[Any, ...] | None
    new_keys: tuple[Any, ...] | None
    ignored: tuple[str, ...]
    skipped: int
    """Key groups skipped unread (the same files on both sides)."""

    @property
    def schema(self) -> pa.Schema:
        """The rows' schema: the new side's view."""
        return self.new_state.schema

    def split(self, units: int) -> list[KeyedDiff]:
        """This diff in parts of at most ``units`` units (Spark partitions)."""
        return [replace(self, units=self.units[i : i + units]) for i in range(0, len(self.units), units)]

    def changes(self) -> Iterator[ScopeDiff]:
        """The differences of every unit that has any."""
        for start in range(0, len(self.units), READ_UNITS):
            chunk = set(self.units[start : start + READ_UNITS])
            old = self._read(self.old, self.old_state, self.old_groups, self.old_keys, chunk)
            new = self._read(self.new, self.new_state, self.new_groups, self.new_keys, chunk)
            for unit in sorted(chunk):
                diff = scope_diff(old.get(unit), new.get(unit), self.new_state.kind, self.ignored)
                if not diff.empty:
                    yield diff

    def _read(
        self,
        side: Side,
        state: KeyedSide,
        groups: frozenset[int],
        keys: tuple[Any, ...] | None,
        units: set[int],
    ) -> dict[int, pa.Table]:
        wanted = {kg for kg in groups if kg % self.modulus in units}
        if not wanted:
            return {}
        parts: dict[int, list[pa.Table]] = {}
        picked = None if keys is None else list(keys)
        for kg, rows in side.read(self.operator, self.state, state, wanted, picked):
            parts.setdefault(kg % self.modulus, []).append(rows)
        return {unit: pa.concat_tables(tables) for unit, tables in parts.items()}


def _comparable(old: pa.Schema, new: pa.Schema, ignored: Sequence[str], what: str) -> None:
    def fields(schema: pa.Schema) -> list[pa.Field]:
        return [f.with_nullable(True) for f in schema if f.name not in ignored]

    if fields(old) != fields(new):
        raise SnapshotDiffError(
            f"{what} cannot be compared entry by entry: its rows are ({_describe(old)}) in the old "
            f"snapshot and ({_describe(new)}) in the new one"
        )


def _describe(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


def _typed(keys: tuple[Any, ...] | None, side: KeyedSide, label: str) -> tuple[Any, ...] | None:
    if keys is None:
        return None
    try:
        return tuple(keys_of_type(list(keys), side.key_type, "keys"))
    except FlinkStateError as exc:
        raise InvalidArgumentError(f"{exc.detail} (in {label})", code=exc.code) from exc


def _wanted(
    side: KeyedSide, keys: tuple[Any, ...] | None, key_groups: frozenset[int] | None
) -> frozenset[int]:
    groups = side.stored if key_groups is None else side.stored & key_groups
    if keys is not None:
        assert side.key_type is not None  # keys_of_type refuses a state without one
        groups &= key_groups_of(keys, side.key_type, side.max_parallelism)
    return groups


def plan_keyed_diff(
    old: Side, new: Side, operator: str, state: str, settings: DiffSettings
) -> KeyedDiff | None:
    """The diff of keyed state ``state`` of ``operator`` (``None``: it is keyed on neither side;
    a side without it is empty); refused when the two sides' rows do not compare."""
    now = int(time.time() * 1000)  # one "now" for the processing-time TTL of both sides
    found_old = old.keyed(operator, state, settings.include_expired, now)
    found_new = new.keyed(operator, state, settings.include_expired, now)
    present = found_new or found_old
    if present is None:
        return None
    o = found_old or replace(present, stored=frozenset(), cutoff=None)
    n = found_new or replace(present, stored=frozenset(), cutoff=None)
    what = f"state {state!r} of operator {operator!r}"
    _comparable(o.schema, n.schema, settings.ignored, what)
    m = math.gcd(o.max_parallelism, n.max_parallelism)
    if settings.key_groups is not None and o.max_parallelism != n.max_parallelism:
        raise SnapshotDiffError(
            f"{what} has max parallelism {o.max_parallelism} in the old snapshot and {n.max_parallelism} "
            "in the new one, so key groups are numbered otherwise on each side: select keys instead"
        )
    if settings.key_groups is not None:
        check_ids_below(settings.key_groups, n.max_parallelism, "keyGroups", "key groups")
    old_keys, new_keys = _typed(settings.keys, o, old.label), _typed(settings.keys, n, new.label)
    old_groups = _wanted(o, old_keys, settings.key_groups) if found_old else frozenset()
    new_groups = _wanted(n, new_keys, settings.key_groups) if found_new else frozenset()
    same = _same_files(old, new, operator, state, o, n) if found_old and found_new else frozenset()
    units = tuple(sorted({kg % m for kg in (old_groups | new_groups) - same}))
    return KeyedDiff(old, new, operator, state, o, n, m, units, old_groups - same, new_groups - same,
                     old_keys, new_keys, settings.ignored, len((old_groups | new_groups) & same))  # fmt: skip


def _same_files(
    old: Side, new: Side, operator: str, state: str, o: KeyedSide, n: KeyedSide
) -> frozenset[int]:
    """Key groups held by the very same files on both sides, where expiry hides alike."""
    if o.max_parallelism != n.max_parallelism or o.cutoff != n.cutoff:
        return frozenset()
    old_files, new_files = old.files_of(operator, state), new.files_of(operator, state)
    if old_files is None or new_files is None:
        return frozenset()
    return frozenset(kg for kg, names in new_files.items() if old_files.get(kg) == names)


def operator_diff(
    old: Side, new: Side, operator: str, state: str, settings: DiffSettings
) -> tuple[ScopeDiff, pa.Schema]:
    """(the difference, the view's schema) of operator list or union state, compared as
    elements, or of broadcast state, compared as a map."""
    if settings.keys is not None or settings.key_groups is not None:
        raise SnapshotDiffError(f"keys and key groups select keyed state; {state!r} is operator state")
    sides = [_operator_table(side, operator, state) for side in (old, new)]
    present = [s for s in sides if s is not None]
    if not present:
        raise CheckpointNotFoundError(f"operator {operator!r} has no state {state!r} in either snapshot")
    broadcast, empty = present[-1][0], present[-1][1].schema.empty_table()
    (ob, ot), (nb, nt) = (s if s is not None else (broadcast, empty) for s in sides)
    if ob != nb:
        raise SnapshotDiffError(
            f"state {state!r} of operator {operator!r} is broadcast state on one side only"
        )
    _comparable(ot.schema, nt.schema, (), f"state {state!r} of operator {operator!r}")
    diff = scope_diff(ot, nt, StateKind.VALUE) if broadcast else element_diff(ot, nt)
    return diff, nt.schema


def _operator_table(side: Side, operator: str, state: str) -> tuple[bool, pa.Table] | None:
    try:
        return side.operator_table(operator, state)
    except CheckpointNotFoundError:
        return None


@dataclass(frozen=True)
class StatePairs:
    """The states of two snapshots: in both, in the old one only, in the new one only."""

    both: tuple[StateName, ...]
    only_old: tuple[StateName, ...]
    only_new: tuple[StateName, ...]


def state_pairs(old: Side, new: Side, operator: str | None = None, state: str | None = None) -> StatePairs:
    """The states to diff (``operator``/``state`` narrow them); a state keyed on one side and
    operator state on the other is refused."""

    def pick(side: Side) -> dict[tuple[str, str], StateName]:
        return {(s.operator, s.state): s for s in side.states()
                if operator in (None, s.operator) and state in (None, s.state)}  # fmt: skip

    olds, news = pick(old), pick(new)
    for name in olds.keys() & news.keys():
        if olds[name].keyed != news[name].keyed:
            raise SnapshotDiffError(f"state {name[1]!r} of operator {name[0]!r} is keyed on one side only")
    both = tuple(news[n] for n in sorted(olds.keys() & news.keys()))
    return StatePairs(both, tuple(olds[n] for n in sorted(olds.keys() - news.keys())),
                      tuple(news[n] for n in sorted(news.keys() - olds.keys())))  # fmt: skip
