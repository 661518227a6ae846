"""One run of ``process`` / ``foreach_batch`` / ``coprocess``, in four steps: read where it
starts (:func:`read_start`: the latest checkpoint, or the savepoint seeding a first run),
plan it (:func:`plan_run`), run its tasks (:func:`run_tasks`) and commit (:func:`commit`).

A run routes rows by key group to ``parallelism`` key-group ranges (one Spark task each,
see :mod:`.routing`), orders each range by event time (ties in input order), runs the
function on a live backend per range (:mod:`.task.subtask`) and collects what the tasks
wrote. The driver then commits ONE checkpoint holding the state of every range and the
run's output (the list state ``output`` of the operator ``<uid>/output``, and each
declared side output beside it, see :mod:`.side_outputs`), through the checkpoint layer's
commit; a run that fails anywhere commits nothing and leaves the previous checkpoint as it
was. The returned DataFrame reads the committed output.

Checkpoint properties carry what the next run continues from: the watermark, the largest
event time seen, the attempt that wrote each subtask (whose live backend a worker may
reuse) and, in streaming, Spark's batch id and a digest of the broadcast elements applied.
A run commits only on the checkpoint it started from, as its successor id (publishing is
exclusive): another run's commit under the same root in between fails it
(``[CONCURRENT_RUN]``), so no run's changes are lost.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from flinkstate.checkpoint import (
    CheckpointError,
    CheckpointExistsError,
    CheckpointStorage,
    CompletedCheckpoint,
    OperatorEntry,
    PendingCheckpoint,
    SubtaskResult,
    open_checkpoint,
)
from flinkstate.state import FlinkStateError, KeyedBroadcastProcessFunction, ProcessFunctionError
from flinkstate.state.ttl import LONG_MIN

from ..errors import ProcessError
from ..shared_root import PROCESS_DECLARATION, cluster_master, refuse_unshared
from ..write.stream import BATCH_ID
from . import placement
from .inputs import Inputs
from .job import Job
from .names import output_uid
from .properties import BROADCAST_DIGEST, MAX_EVENT_TIME, TOKEN, WATERMARK, start_properties
from .shipping import ship
from .task.plan import TaskPlan
from .task.subtask import RESULT_SCHEMA, run_subtask

_LOG = logging.getLogger("flinkstate.process")


Results = list[tuple[list[SubtaskResult], dict[str, Any]]]
"""What the tasks hand back: each task's results and its stats (see :mod:`.task.subtask`)."""


@dataclass(frozen=True)
class Start:
    """Where a run starts: the latest checkpoint under its root (``base``, id ``latest``),
    and the checkpoint its state comes from (``seed``: the base, else the savepoint of
    ``initial_state``, else none)."""

    latest: int | None
    base: CompletedCheckpoint | None
    seed: CompletedCheckpoint | None

    @property
    def properties(self) -> Mapping[str, str]:
        return self.base.manifest.properties if self.base is not None else {}

    @property
    def own(self) -> bool:
        """The state continues this root's own checkpoint (not a seeding savepoint)."""
        return self.seed is self.base


@dataclass(frozen=True)
class EventTimes:
    """The watermark a run starts from, the largest event time seen (this run's input
    included) and the watermark the run ends at."""

    watermark: int
    max_seen: int
    end_watermark: int


@dataclass(frozen=True)
class RunPlan:
    """A planned run: the checkpoint it writes, the plan its tasks get, and what its commit
    records besides their results (its event times, the digest of its broadcast elements)."""

    pending: PendingCheckpoint
    tasks: TaskPlan
    times: EventTimes
    digest: str | None


def run(job: Job, inputs: Inputs, broadcast: Any, batch_id: int | None) -> CompletedCheckpoint:
    """One run (a micro-batch when ``batch_id`` is given); returns the checkpoint it committed
    (a replayed batch: the one committed before)."""
    storage = open_root(job, inputs.spark)
    start = read_start(storage, job)
    if start.base is not None and _replayed(start, job, batch_id):
        return start.base
    planned = plan_run(job, inputs, broadcast, batch_id, storage, start)
    results = run_tasks(job, inputs, planned, start)
    return commit(job, inputs.spark, storage, start, planned, results, batch_id)


def open_root(job: Job, spark: Any) -> CheckpointStorage:
    """The run's checkpoint root; a local one the executors do not share is refused first."""
    storage = CheckpointStorage(
        job.checkpoint,
        job.storage_options,
        retain=job.retain,
        incremental=job.incremental,
        rocksdb_format=job.rocksdb_format,
    )
    master = cluster_master(spark)  # before any task: a root the executors do not share is refused
    cluster = None if master is None else f"Spark's master is {master}, not local[...]"
    refuse_unshared(storage.storage, job.shared_filesystem, cluster, PROCESS_DECLARATION)
    return storage


def read_start(storage: CheckpointStorage, job: Job) -> Start:
    """The latest checkpoint of the root, and the seed of the run's state."""
    latest = storage.latest_id()
    base = None if latest is None else storage.load(latest, allow_pickle=True)
    seed = base
    if seed is None and job.initial_state is not None:
        opened = open_checkpoint(job.initial_state, job.storage_options, allow_pickle=True)
        if not isinstance(opened, CompletedCheckpoint):
            raise ProcessError(
                f"initial_state {job.initial_state} is a Flink savepoint: restore it with open_checkpoint "
                "and write a flinkstate savepoint first",
                code="UNSUPPORTED_FORMAT",
            )
        seed = opened
    return Start(latest, base, seed)


def _replayed(start: Start, job: Job, batch_id: int | None) -> bool:
    """Whether micro-batch ``batch_id`` is the one the base committed (Spark replays it);
    an earlier one is ``[BATCH_ID_BEHIND]``."""
    if batch_id is None:
        return False
    done = int(start.properties.get(BATCH_ID, "-1"))
    if batch_id < done:
        raise ProcessError(
            f"micro-batch {batch_id} comes after batch {done} was committed to {job.checkpoint!r}: "
            "Spark replays only the last batch of a query, so this query's checkpointLocation was "
            "reset or belongs to another query, and its batches would be skipped. Restart it with "
            f"the checkpointLocation that committed batch {done}, or give it a new checkpoint root "
            "(initial_state= can seed it from this one)",
            code="BATCH_ID_BEHIND",
        )
    return batch_id == done


def plan_run(
    job: Job,
    inputs: Inputs,
    broadcast: Any,
    batch_id: int | None,
    storage: CheckpointStorage,
    start: Start,
) -> RunPlan:
    """Check the run against where it starts, begin its checkpoint and plan its tasks."""
    spark, props = inputs.spark, start.properties
    key_type = inputs.key_type(job)
    op = _check_base(start.seed, job, key_type, own=start.own)
    p = job.parallelism or (op.parallelism if op is not None else default_parallelism(spark))
    if not 1 <= p <= job.max_parallelism:
        raise ProcessError(f"parallelism {p} must be in 1..max_parallelism ({job.max_parallelism})")
    ship(spark, job.function)  # before any task: a module the executors lack travels by value
    times = event_times(props, job, inputs)
    elements, digest = broadcast_elements(broadcast, job, props, batch_id)
    try:  # only the successor of its base: publishing is exclusive, so one run of a base commits
        pending = storage.begin((start.latest or 0) + 1)
    except CheckpointError as exc:
        if exc.code != "CHECKPOINT_ID_NOT_NEW":
            raise
        raise _concurrent(job, start.latest, storage.latest_id()) from exc
    seed = start.seed
    plan = TaskPlan(
        uid=job.uid,
        function=job.function,
        backend=job.backend,
        key_columns=job.key_columns,
        key_type=key_type,
        value_columns=inputs.value_columns,
        event_time=job.event_time,
        parallelism=p,
        max_parallelism=job.max_parallelism,
        target=pending.target,
        root_url=storage.storage.url,
        base=seed.manifest if seed is not None else None,
        base_directory=seed.directory if seed is not None else None,
        base_token=props.get(TOKEN) if start.own else None,
        token=uuid.uuid4().hex,
        watermark=times.watermark,
        end_watermark=times.end_watermark,
        watermark_delay=job.watermark_delay,
        end_of_input=job.end_of_input,
        broadcast=elements,
        output=job.output,
        job_parameters=job.job_parameters,
        second=inputs.second,
        side_outputs=job.side_outputs,
        executor_bytes=job.executor_cache_bytes,
    )
    return RunPlan(pending, plan, times, digest)


def event_times(props: Mapping[str, str], job: Job, inputs: Inputs) -> EventTimes:
    """The run's watermarks, from the base's properties and the input's largest event time."""
    watermark = int(props.get(WATERMARK, LONG_MIN))
    max_seen = int(props.get(MAX_EVENT_TIME, LONG_MIN))
    run_max = inputs.max_event_time(job)
    max_seen = max_seen if run_max is None else max(max_seen, run_max)
    # as Flink's bounded-out-of-orderness generator emits, and as elements move it in a run:
    # an element at the largest event time may still come, so a timer there must not fire yet
    end_watermark = watermark if max_seen == LONG_MIN else max(watermark, max_seen - job.watermark_delay - 1)
    return EventTimes(watermark, max_seen, end_watermark)


def broadcast_elements(
    broadcast: Any, job: Job, props: Mapping[str, str], batch_id: int | None
) -> tuple[tuple[Any, ...], str | None]:
    """The broadcast elements the run applies, and the digest it records (a streaming query
    applies the same elements once)."""
    elements = tuple(broadcast.collect()) if broadcast is not None else ()
    if elements and not isinstance(job.function, KeyedBroadcastProcessFunction):
        raise ProcessError("broadcast elements need a KeyedBroadcastProcessFunction", code="INVALID_FUNCTION")
    digest = props.get(BROADCAST_DIGEST)
    if broadcast is not None:
        applied, digest = digest, _digest(broadcast.schema, elements)
        if batch_id is not None and applied == digest:
            elements = ()  # a streaming query applied exactly these already
    return elements, digest


def run_tasks(job: Job, inputs: Inputs, planned: RunPlan, start: Start) -> Results:
    """Run one Spark task per subtask and add their results to the pending checkpoint
    (aborted, and the error reported as ours, when any task fails)."""
    spark, plan, pending = inputs.spark, planned.tasks, planned.pending
    p = plan.parallelism
    ranges = inputs.ranges(job, plan.key_type, p)
    try:
        ranges = placement.place(ranges, placement.preferred(start.properties, spark, p))
        rows = ranges.mapInArrow(partial(run_subtask, plan), RESULT_SCHEMA.to_string()).collect()
        results: Results = [pickle.loads(row[0]) for row in rows]
        indexes = sorted(r.entry.index for rs, _ in results for r in rs if r.uid == job.uid)
        if indexes != list(range(p)):
            raise ProcessError(
                f"expected one result per subtask 0..{p - 1}, got {indexes}", code="RUN_INCOMPLETE"
            )
        for subtask_results, _ in results:
            for result in subtask_results:
                pending.add(result)
    except Exception as exc:
        pending.abort()
        raise _task_error(exc, start.latest) from exc
    return results


def commit(
    job: Job,
    spark: Any,
    storage: CheckpointStorage,
    start: Start,
    planned: RunPlan,
    results: Results,
    batch_id: int | None,
) -> CompletedCheckpoint:
    """Commit the run's checkpoint with what the next run continues from, unless another run
    committed under the root meanwhile (``[CONCURRENT_RUN]``, nothing committed)."""
    pending, times = planned.pending, planned.times
    now = storage.latest_id()
    if now != start.latest:
        pending.abort()
        raise _concurrent(job, start.latest, now)
    p = planned.tasks.parallelism
    by_subtask = {r.entry.index: stats for rs, stats in results for r in rs if r.uid == job.uid}
    properties = {
        WATERMARK: str(times.end_watermark),
        MAX_EVENT_TIME: str(times.max_seen),
        TOKEN: " ".join(by_subtask[i]["attempt"] for i in range(p)),
        **start_properties([by_subtask[i] for i in range(p)]),
        **placement.location_properties(spark, [by_subtask[i]["location"] for i in range(p)]),
    }
    if batch_id is not None:
        properties[BATCH_ID] = str(batch_id)
        if planned.digest is not None:
            properties[BROADCAST_DIGEST] = planned.digest
    try:
        committed = pending.commit(properties)
    except CheckpointExistsError as exc:  # another run committed in between (our files are gone)
        raise _concurrent(job, start.latest, storage.latest_id()) from exc
    _LOG.info(
        "process %s: checkpoint %d committed to %s; subtasks %s",
        job.uid,
        committed.checkpoint_id,
        storage.storage.safe_url,
        ", ".join(
            f"{i}: {s['start']} ({s['downloaded']} B downloaded)" for i, s in sorted(by_subtask.items())
        ),
    )
    return committed


def _check_base(seed: CompletedCheckpoint | None, job: Job, key_type: Any, own: bool) -> OperatorEntry | None:
    """The operator being continued, checked against the job (before any task runs)."""
    if seed is None:
        return None
    if own:
        others = sorted(o.uid for o in seed.manifest.operators if o.uid not in (job.uid, output_uid(job.uid)))
        if others:
            raise ProcessError(
                f"checkpoint {job.checkpoint!r} holds operators {others} of another job: "
                "give each process() its own checkpoint root",
                code="CHECKPOINT_SHARED",
            )
    op = seed.manifest.operator(job.uid)
    if op is None:
        where = (
            f"the latest checkpoint under {job.checkpoint!r}" if own else f"savepoint {job.initial_state!r}"
        )
        raise ProcessError(f"{where} has no operator {job.uid!r}", code="UNKNOWN_OPERATOR")
    if op.max_parallelism != job.max_parallelism:
        raise ProcessError(
            f"operator {job.uid!r} was checkpointed with max parallelism {op.max_parallelism}, "
            f"not {job.max_parallelism}",
            code="MAX_PARALLELISM_MISMATCH",
        )
    if op.key_type is not None and op.key_type != key_type:
        raise ProcessError(
            f"operator {job.uid!r} was checkpointed with key type {op.key_type}; the key "
            f"column(s) {list(job.key_columns)} are {key_type}",
            code="KEY_TYPE_MISMATCH",
        )
    return op


def default_parallelism(spark: Any) -> int:
    """Spark's default parallelism, also on a Spark Connect session (which has no SparkContext):
    there, ``spark.default.parallelism`` when set, else the partitions Spark gives a range."""
    from pyspark.sql import functions as F  # noqa: N812

    context = getattr(spark, "sparkContext", None)  # Connect: an AttributeError, so None
    if context is not None:
        return int(context.defaultParallelism)
    conf = spark.conf.get("spark.default.parallelism", None)
    if conf:
        return int(conf)
    ids = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
    return int(ids.agg(F.max("p")).first()[0]) + 1


def _concurrent(job: Job, base: int | None, now: int | None) -> ProcessError:
    """Another run committed under the root after this one read ``base``."""
    return ProcessError(
        f"checkpoint {now} was committed under {job.checkpoint!r} by another run while this one "
        f"ran from {'checkpoint ' + str(base) if base is not None else 'no checkpoint'}: "
        "committing would lose that run's changes, so nothing was committed. Run one job at a "
        "time per checkpoint root, then run this one again",
        code="CONCURRENT_RUN",
    )


def _digest(schema: Any, elements: Sequence[Any]) -> str:
    """What identifies broadcast elements: their schema and values, in order."""
    text = repr((schema.simpleString(), [tuple(e) for e in elements]))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


_OUR_ERROR = re.compile(r"(\w+Error): \[([A-Z_]+)\] ([^\n]*)")


def _task_error(exc: Exception, latest: int | None) -> Exception:
    """Our error raised in a task (Spark wraps it in its own), or ``[RUN_FAILED]`` naming
    what Spark reported (a lost executor, a task out of retries)."""
    if isinstance(exc, FlinkStateError):
        return exc
    found = _OUR_ERROR.findall(str(exc))
    if not found:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
        said = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
        kept = "no checkpoint" if latest is None else f"checkpoint {latest}"
        return ProcessError(
            f"the run's Spark job failed, so nothing was committed ({kept} is still the latest; "
            f"run it again): {type(exc).__name__}: {said[:2000]}",
            code="RUN_FAILED",
        )
    name, code, message = found[-1]
    if name == "ProcessFunctionError":
        return ProcessFunctionError(message, code=code)
    return ProcessError(message, code=code)
