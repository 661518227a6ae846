"""What a run's checkpoint records for the next run (its properties): the watermark, the
largest event time seen, the attempt that wrote each subtask, how each subtask started and
where it ran, and in streaming the digest of the broadcast elements applied (Spark's batch id:
:data:`flinkstate.connector.write.stream.BATCH_ID`; where tasks ran: :data:`.placement.LOCATIONS`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flinkstate.checkpoint import RUN_TOKEN_PROPERTY

WATERMARK = "flinkstate.process.watermark"
MAX_EVENT_TIME = "flinkstate.process.max_event_time"
TOKEN = RUN_TOKEN_PROPERTY
REUSED = "flinkstate.process.reused_subtasks"
"""How many subtasks started warm (their live backend reused, nothing restored)."""
STARTS = "flinkstate.process.subtask_starts"
"""How each subtask's backend started, in subtask order: warm, cached, cold or new (see :mod:`.task.live`)."""
DOWNLOADED = "flinkstate.process.subtask_downloaded_bytes"
"""The bytes of checkpoint files each subtask's restore downloaded, in subtask order."""
EXECUTORS = "flinkstate.process.subtask_executors"
"""Where each subtask ran, in subtask order: its executor's host and local directory's digest
(``-``: not on a Spark executor)."""
BROADCAST_DIGEST = "flinkstate.process.broadcast_digest"


def start_properties(stats: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The checkpoint properties saying how each subtask's backend started and what its
    restore downloaded (``stats``: each subtask's, in order; see :mod:`.task.live`)."""
    starts = [s["start"] for s in stats]
    out = {REUSED: str(starts.count("warm")), STARTS: " ".join(starts)}
    out[DOWNLOADED] = " ".join(str(s["downloaded"]) for s in stats)
    out[EXECUTORS] = " ".join(s["executor"] or "-" for s in stats)
    return out
