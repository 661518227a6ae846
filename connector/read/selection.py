"""What the read options ``keys``, ``keyGroups`` and ``subtasks`` select, checked against the state.

The selection is part of the relation (an option), so every scan of a loaded DataFrame
reads the same rows, whatever Spark does with pushed filters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flinkstate.checkpoint import OperatorEntry, check_ids_below, key_groups_of, keys_of_type
from flinkstate.state import FlinkStateError
from flinkstate.state.operator import OperatorStateMode

from ..errors import OptionError
from ..options import ReadOptions


@dataclass(frozen=True)
class Selection:
    """Typed keys (``None``: any), the key groups allowed (``None``: all), subtasks (operator state)."""

    keys: tuple[Any, ...] | None = None
    key_groups: frozenset[int] | None = None
    subtasks: frozenset[int] | None = None


def keyed_selection(options: ReadOptions, op: OperatorEntry) -> Selection:
    """Keys and key groups of a keyed state; ``subtasks`` selects the key groups they own."""
    groups = options.key_groups
    try:
        if groups is not None:
            check_ids_below(groups, op.max_parallelism, "keyGroups", "key groups")
        if options.subtasks is not None:
            check_ids_below(options.subtasks, op.parallelism, "subtasks", "subtasks")
            owned = frozenset(
                kg
                for st in op.subtasks
                if st.index in options.subtasks and st.key_group_range is not None
                for kg in range(st.key_group_range[0], st.key_group_range[1] + 1)
            )
            groups = owned if groups is None else groups & owned
        keys = None
        if options.keys is not None:
            keys = tuple(keys_of_type(options.keys, op.key_type, "keys"))
            assert op.key_type is not None  # keys_of_type refuses a state without one
            of_keys = key_groups_of(keys, op.key_type, op.max_parallelism)
            groups = of_keys if groups is None else groups & of_keys
    except FlinkStateError as exc:
        raise OptionError(exc.detail) from exc
    return Selection(keys, groups)


def operator_selection(options: ReadOptions, op: OperatorEntry, mode: OperatorStateMode) -> Selection:
    """Subtasks of an operator list/union state (broadcast state is one map: nothing to select)."""
    keyed_only = [n for n, v in (("keys", options.keys), ("keyGroups", options.key_groups)) if v is not None]
    if keyed_only:
        raise OptionError(f"option(s) {keyed_only} select keyed state; {options.state!r} is operator state")
    if options.subtasks is None:
        return Selection()
    if mode is OperatorStateMode.BROADCAST:
        raise OptionError(
            f"option subtasks: broadcast state {options.state!r} is the same map on every subtask"
        )
    try:
        check_ids_below(options.subtasks, op.parallelism, "subtasks", "subtasks")
    except FlinkStateError as exc:
        raise OptionError(exc.detail) from exc
    return Selection(subtasks=options.subtasks)
