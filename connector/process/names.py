"""The names a run shares between its driver and its tasks: the reserved columns of the routed
input, and where a checkpoint holds the run's output (main and side outputs)."""

from __future__ import annotations

SEQ, ROUTE = "__flinkstate_seq", "__flinkstate_route"
"""The routed input's columns: a row's sequence (input order; -1: a range's marker row) and
the route of its subtask's partition."""
OUTPUT_STATE = "output"
"""The list state holding the main output in the operator :func:`output_uid`."""
SIDE_PREFIX = "side_output."


def output_uid(uid: str) -> str:
    """The operator holding a run's output in its checkpoint."""
    return f"{uid}/output"


def side_state(tag_id: str) -> str:
    """The list state holding the side output ``tag_id`` in the operator ``<uid>/output``."""
    return SIDE_PREFIX + tag_id
