"""The task side of a two-input run (:mod:`..coprocess`): one key-group range's rows of both
inputs, in the run's order, fed to ``process_element1`` / ``process_element2``.

The frame a task reads holds each input's row as a struct column (``IN1`` or ``IN2``, the
other one null), the input's number (``INPUT``), the event time (``TIME``), the sequence and
the route (those of :mod:`.subtask`). Consecutive rows of one input go to the operator
in one call.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from flinkstate.state.process import KeyedProcessOperator, element_rows

from ..routing import route_values
from .subtask import keys_of, range_rows, row_class_of

if TYPE_CHECKING:
    from .outputs import Outputs
    from .plan import TaskPlan

IN1, IN2 = "__flinkstate_in1", "__flinkstate_in2"
INPUT, TIME = "__flinkstate_input", "__flinkstate_time"


@dataclass(frozen=True)
class SecondInput:
    """The second input's columns (the first input's are the plan's own)."""

    value_columns: tuple[str, ...]
    key_columns: tuple[str, ...]

    def feed(
        self,
        plan: TaskPlan,
        operator: KeyedProcessOperator,
        subtask: int,
        batches: Iterator[pa.RecordBatch],
        sink: Outputs,
    ) -> int:
        """Feed the range's rows of both inputs to ``operator``, in order; return how many."""
        sides = {
            1: (IN1, plan.value_columns, plan.key_columns, row_class_of(plan.value_columns)),
            2: (IN2, self.value_columns, self.key_columns, row_class_of(self.value_columns)),
        }
        route = route_values(plan.parallelism)[subtask]
        rows = 0
        for batch in batches:
            batch = range_rows(batch, route, subtask)
            inputs = batch.column(INPUT).to_numpy(zero_copy_only=False)
            cuts = [0, *(np.flatnonzero(np.diff(inputs)) + 1).tolist(), batch.num_rows]
            for start, end in pairwise(cuts):
                if start == end:
                    continue
                part = batch.slice(start, end - start)
                side = int(inputs[start])
                struct, names, key_columns, row_class = sides[side]
                columns = [c.to_pylist() for c in part.column(struct).flatten()]
                stamps = None if plan.event_time is None else part.column(TIME).to_pylist()
                keys = keys_of(columns, names, key_columns)
                operator.process_elements(keys, element_rows(row_class, columns), stamps, side)
                sink.take(operator)
            rows += batch.num_rows
        return rows
