"""Redistribution of operator state for a change of parallelism (Flink's round-robin repartitioner).

* SPLIT_DISTRIBUTE: all elements of all old subtasks, in subtask order, cut into
  contiguous runs whose sizes differ by at most one; the subtask that gets the first
  larger run rotates from state to state so small states do not pile up on subtask 0.
  States are walked in the iteration order of the ``java.util.HashMap`` Flink groups them
  in (:func:`hash_map_order`), so the rotation matches Flink's. At unchanged parallelism
  every subtask keeps its own elements (as in Flink, even when the state is missing on
  some subtasks; those get it empty).
* UNION: every new subtask gets all elements of all old subtasks.
* BROADCAST: new subtask ``i`` gets a full copy of old subtask ``i % old_parallelism``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

from ..errors import InvalidArgumentError, StateConflictError, StateMigrationError
from ..keygroups.hashing import java_string_hash
from .states import OperatorStateData, OperatorStateMode

SPLIT = OperatorStateMode.SPLIT_DISTRIBUTE


def repartition(
    old: Sequence[Iterable[OperatorStateData]], new_parallelism: int
) -> list[list[OperatorStateData]]:
    """The operator states of each of ``new_parallelism`` subtasks, from each old subtask's.

    ``old[i]`` holds old subtask ``i``'s states (empty for a subtask that wrote none), so
    ``len(old)`` is the old parallelism. Broadcast states and list states have separate
    name spaces. The result shares nothing
    mutable with ``old``.
    """
    if type(new_parallelism) is not int or new_parallelism < 1:
        raise InvalidArgumentError(
            f"parallelism must be a positive int, got {new_parallelism!r}",
            code="INVALID_PARALLELISM",
        )
    old = [list(subtask) for subtask in old]
    by_name: dict[tuple[bool, str], list[tuple[int, OperatorStateData]]] = {}
    for index, subtask in enumerate(old):
        for data in subtask:
            key = (data.mode is OperatorStateMode.BROADCAST, data.name)
            by_name.setdefault(key, []).append((index, data))
    out: list[dict[tuple[bool, str], OperatorStateData]] = [{} for _ in range(new_parallelism)]
    unchanged = new_parallelism == len(old)
    start = 0
    is_split = {key: not key[0] and found[0][1].mode is SPLIT for key, found in by_name.items()}
    split = [(False, n) for n in hash_map_order([n for (_, n), s in is_split.items() if s])]
    for name in split + [key for key, s in is_split.items() if not s]:
        indexed = by_name[name]
        parts = [data for _, data in indexed]
        _check_compatible(name[1], parts)
        mode = parts[0].mode
        if mode is OperatorStateMode.BROADCAST:
            for i in range(new_parallelism):
                out[i][name] = parts[i % len(parts)].copy()
        elif mode is OperatorStateMode.UNION:
            union = [e for p in parts for e in p.elements]
            for i in range(new_parallelism):
                out[i][name] = parts[0].copy(copy.deepcopy(union))
        elif unchanged:
            # Flink keeps split state where it was when the parallelism does not change.
            kept = {index: data for index, data in indexed}
            for i in range(new_parallelism):
                own = kept.get(i)
                out[i][name] = parts[0].copy([]) if own is None else own.copy()
        else:
            start = _split(name, parts, out, start)
    return [list(states.values()) for states in out]


def hash_map_order(names: list[str], capacity: int = 16) -> list[str]:
    """``names`` (distinct, in insertion order) in the iteration order of a ``java.util.HashMap``
    they were put in: by bucket, ``(h ^ (h >>> 16)) & (capacity - 1)`` of Java's
    ``String.hashCode()`` with the capacity (``capacity``: 16 for ``new HashMap<>()``, the
    power of two at or above ``n`` for ``new HashMap<>(n)``; doubled while over 3/4 full) the
    map grew to; within a bucket, insertion order. (Flink inserts in the order its subtasks'
    state handles list the names; ours is the order of first registration, subtask by subtask.)"""
    while len(names) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = java_string_hash(name) & 0xFFFF_FFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(names, key=bucket)


def _check_compatible(name: str, parts: list[OperatorStateData]) -> None:
    modes = {p.mode for p in parts}
    if len(modes) != 1:
        raise StateConflictError(
            f"operator state {name!r} has different modes in different subtasks: "
            f"{sorted(m.value for m in modes)}",
            code="STATE_MODE_CONFLICT",
        )
    types = {(p.value_type, p.user_key_type) for p in parts}
    if len(types) != 1:
        raise StateMigrationError(
            f"operator state {name!r} has different types in different subtasks: "
            f"{sorted(str(v) if k is None else f'{k} -> {v}' for v, k in types)}"
        )


def _split(
    name: tuple[bool, str],
    parts: list[OperatorStateData],
    out: list[dict[tuple[bool, str], OperatorStateData]],
    start: int,
) -> int:
    elements = copy.deepcopy([e for p in parts for e in p.elements])
    n = len(out)
    base, remainder = divmod(len(elements), n)
    next_start = start
    offset = 0
    for j in range(n):
        index = (j + start) % n
        count = base
        if remainder > 0:
            count += 1
            remainder -= 1
        elif remainder == 0:
            next_start = index
            remainder -= 1
        out[index][name] = parts[0].copy(elements[offset : offset + count])
        offset += count
    return next_start
