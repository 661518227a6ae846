"""What a run hands each of its tasks (:class:`TaskPlan`): pickled once per run, small but
for the function."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from flinkstate.checkpoint import DEFAULT_CACHE_BYTES, CheckpointTarget, Manifest, Storage
from flinkstate.state import BackendOptions, TypeInformation
from flinkstate.state.process import KeyedProcessOperator, ProcessFunction

from ..output import OutputSchema
from ..side_outputs import SideOutput
from .outputs import Outputs


class SecondFeed(Protocol):
    """The second input of a two-input run (:class:`.two_inputs.SecondInput`): it feeds a
    range's rows of both inputs to the operator, in the run's order, and says how many."""

    def feed(
        self,
        plan: TaskPlan,
        operator: KeyedProcessOperator,
        subtask: int,
        batches: Iterator[pa.RecordBatch],
        sink: Outputs,
    ) -> int: ...


@dataclass(frozen=True)
class TaskPlan:
    """Everything a task needs (pickled once per run, small but for the function)."""

    uid: str
    function: ProcessFunction
    backend: BackendOptions
    key_columns: tuple[str, ...]
    key_type: TypeInformation
    value_columns: tuple[str, ...]
    event_time: str | None
    parallelism: int
    max_parallelism: int
    target: CheckpointTarget
    root_url: str
    base: Manifest | None
    base_directory: Storage | None
    base_token: str | None
    """The committed attempts of the base checkpoint, one token per subtask (space-separated)."""
    token: str
    watermark: int
    end_watermark: int
    watermark_delay: int
    end_of_input: bool
    broadcast: tuple[Any, ...]
    output: OutputSchema
    job_parameters: Mapping[str, str]
    second: SecondFeed | None = None
    """The second input of a ``KeyedCoProcessFunction`` (see :mod:`..coprocess`), else None."""
    side_outputs: tuple[SideOutput, ...] = ()
    executor_bytes: int = DEFAULT_CACHE_BYTES
    """What each executor keeps at most of live DBs and cached files (0: nothing; see
    :mod:`.executor`)."""
