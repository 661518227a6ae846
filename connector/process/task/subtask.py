"""One key-group range of a ``process`` run, inside a Spark task.

The task gets its subtask's live backend (:mod:`.live`: the one its Python worker or its
executor kept from the attempt whose results the checkpoint being continued committed,
else restored from that checkpoint at any parallelism, a rescale); feeds it the range's
rows (already in event-time order), moves the watermark, fires timers, snapshots (an
increment when the backend is live or restored at the same parallelism, see
:class:`flinkstate.checkpoint.CheckpointTarget`), and writes the state and the output
(main and side outputs) as uniquely named files. It hands back only small results: the
driver commits them, all ranges together, or nothing, and records which attempt's results
it committed for each subtask, and how each started."""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.checkpoint import SubtaskResult
from flinkstate.state import SerializationError
from flinkstate.state.operator import OperatorStateData, OperatorStateMode
from flinkstate.state.process import KeyedProcessOperator, element_rows

from ...errors import ProcessError
from ..names import OUTPUT_STATE, ROUTE, SEQ, output_uid, side_state
from ..placement import here
from ..routing import route_values
from .executor import ExecutorStore
from .live import acquire
from .outputs import Outputs
from .plan import TaskPlan

RESULT_SCHEMA = pa.schema([pa.field("result", pa.binary())])


def _feed(
    plan: TaskPlan,
    operator: KeyedProcessOperator,
    subtask: int,
    batches: Iterator[pa.RecordBatch],
    sink: Outputs,
) -> int:
    """Feed the range's rows to ``operator``; return how many."""
    row_class = row_class_of(plan.value_columns)
    route = route_values(plan.parallelism)[subtask]
    rows = 0
    for batch in batches:
        batch = range_rows(batch, route, subtask)
        if batch.num_rows == 0:
            continue
        columns = [batch.column(name).to_pylist() for name in plan.value_columns]
        values = element_rows(row_class, columns)  # built as consumed: rows die young
        keys = keys_of(columns, plan.value_columns, plan.key_columns)
        stamps = None if plan.event_time is None else batch.column(plan.event_time).to_pylist()
        operator.process_elements(keys, values, stamps)
        rows += batch.num_rows
        sink.take(operator)
    return rows


def row_class_of(value_columns: tuple[str, ...]) -> type[Any]:
    """A ``Row`` class per input schema: rows are built as tuples of it (no per-row setattr)."""
    from pyspark.sql import Row

    return type("Row", (Row,), {"__fields__": list(value_columns)})


def range_rows(batch: pa.RecordBatch, route: int, subtask: int) -> pa.RecordBatch:
    """``batch`` without the range's marker row, checked to hold only ``subtask``'s rows."""
    seq = batch.column(SEQ)
    if batch.num_rows and pc.min(seq).as_py() < 0:  # the range's marker row
        batch = batch.filter(pc.greater_equal(seq, 0))
    routes = batch.column(ROUTE)
    if batch.num_rows and (routes.null_count or pc.min_max(routes).as_py() != {"min": route, "max": route}):
        raise ProcessError(
            f"task {subtask} got rows of another subtask: Spark did not keep the "
            "hash partitioning the runner asked for",
            code="ROUTING_FAILED",
        )
    return batch


def keys_of(columns: list[list[Any]], names: tuple[str, ...], key_columns: tuple[str, ...]) -> list[Any]:
    """Each row's key: the key column's value, or a tuple of the key columns' values."""
    if len(key_columns) == 1:
        return columns[names.index(key_columns[0])]
    return list(zip(*(columns[names.index(k)] for k in key_columns), strict=True))


def run_subtask(plan: TaskPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The body of one Spark task (``mapInArrow``): yields one row, the pickled results."""
    from pyspark import TaskContext

    context = TaskContext.get()
    subtask = context.partitionId() if context is not None else 0
    attempt_number = context.attemptNumber() if context is not None else 0
    run: dict[str, Any] = {
        "watermark_delay": plan.watermark_delay,
        "task_name": plan.uid,  # the runtime context names the task by the run's uid
        "attempt_number": attempt_number,
        "job_parameters": plan.job_parameters,
    }
    store = ExecutorStore.here(plan.executor_bytes)
    live = acquire(plan, subtask, run, store)
    operator = live.operator
    try:
        out = Outputs(plan.side_outputs)
        operator.open()
        for element in plan.broadcast:
            operator.process_broadcast_element(element)
        feed = _feed if plan.second is None else plan.second.feed
        rows = feed(plan, operator, subtask, batches, out)
        if plan.end_watermark > operator.current_watermark:
            operator.advance_watermark(plan.end_watermark)
        operator.advance_processing_time()
        if plan.end_of_input:
            operator.end_of_input()
        out.take(operator)
        operator.close()
        results = _write(plan, operator, subtask, out, store)
    except BaseException:
        live.drop()
        raise
    attempt = f"{plan.token}.{subtask}.{uuid.uuid4().hex[:12]}"
    live.keep(plan, subtask, attempt, store)
    side = {tag_id: len(values) for tag_id, values in out.side.items()}
    stats = {
        "rows": rows,
        "output": len(out.main),
        "side_output": side,
        "reused": int(live.start == "warm"),
        "start": live.start,
        "executor": "" if store is None else store.name,
        "location": here(),
        "downloaded": live.downloaded,
        "attempt": attempt,
    }
    yield pa.RecordBatch.from_arrays(
        [pa.array([pickle.dumps((results, stats))], pa.binary())], schema=RESULT_SCHEMA
    )


def _write(
    plan: TaskPlan, operator: KeyedProcessOperator, subtask: int, out: Outputs, store: ExecutorStore | None
) -> list[SubtaskResult]:
    """Write the subtask's state and its output (main and side outputs, one operator's
    states, so they commit together), a copy of each file kept in the executor's cache;
    return both results."""
    p, max_p = plan.parallelism, plan.max_parallelism
    target = plan.target if store is None else plan.target.through(store.cache)
    # the state with its changes (an increment when the backend was reused)
    result = target.write_keyed(plan.uid, operator.backend, subtask, p, operator.operator_state)
    outputs = [(OUTPUT_STATE, plan.output, plan.output.normalize(out.main))]
    for side in plan.side_outputs:
        outputs.append((side_state(side.tag_id), side.schema, side.rows(out.side.get(side.tag_id, []))))
    mode = OperatorStateMode.SPLIT_DISTRIBUTE
    states = [OperatorStateData(name, mode, schema.type_info, rows) for name, schema, rows in outputs]
    writer = target.writer(output_uid(plan.uid), subtask, p, max_p)
    try:
        output = writer.write(operator=states)
    except SerializationError as exc:
        writer.abort()
        target.discard(result)
        found = (schema.mismatch(rows) for _, schema, rows in outputs)
        raise next((e for e in found if e is not None), plan.output.diagnose(outputs[0][2], exc)) from exc
    return [result, output]
