"""Stateful processing on Spark executors: ``process`` over a DataFrame, ``foreach_batch``
for a stream.

A run routes rows by key group to ``parallelism`` key-group ranges (one Spark task each,
see :mod:`.routing`), orders each range by event time (ties in input order), runs the
function on a live backend per range (:mod:`.process_task`) and collects what the tasks
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
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from flinkstate.checkpoint import (
    CheckpointError,
    CheckpointExistsError,
    CheckpointStorage,
    CompletedCheckpoint,
    OperatorEntry,
    open_checkpoint,
)
from flinkstate.state import FlinkStateError, KeyedBroadcastProcessFunction, ProcessFunctionError
from flinkstate.state.process import tag_id_of
from flinkstate.state.ttl import LONG_MIN

from . import placement
from .errors import ProcessError
from .inputs import Inputs, OneInput
from .process_options import Job, parse_backend, parse_job
from .process_task import OUTPUT_STATE, RESULT_SCHEMA, TaskPlan, output_uid, run_subtask
from .shared_root import PROCESS_DECLARATION, cluster_master, refuse_unshared
from .shipping import ship
from .side_outputs import committed_frame, side_frame
from .stream import BATCH_ID

WATERMARK = "flinkstate.process.watermark"
MAX_EVENT_TIME = "flinkstate.process.max_event_time"
TOKEN = "flinkstate.process.token"
REUSED = "flinkstate.process.reused_subtasks"
"""How many subtasks started warm (their live backend reused, nothing restored)."""
STARTS = "flinkstate.process.subtask_starts"
"""How each subtask's backend started, in subtask order: warm, cached, cold or new (see :mod:`.live`)."""
DOWNLOADED = "flinkstate.process.subtask_downloaded_bytes"
"""The bytes of checkpoint files each subtask's restore downloaded, in subtask order."""
EXECUTORS = "flinkstate.process.subtask_executors"
"""Where each subtask ran, in subtask order: its executor's host and local directory's digest
(``-``: not on a Spark executor)."""
BROADCAST_DIGEST = "flinkstate.process.broadcast_digest"
_LOG = logging.getLogger("flinkstate.process")


def process(
    df: Any,
    key: str | Sequence[str],
    function: Any,
    output_schema: Any,
    checkpoint: str,
    uid: str,
    **options: Any,
) -> Any:
    """Run ``function`` over ``df`` keyed by ``key``; return its committed output.

    Options: ``backend`` ("heap" or "rocksdb"), ``rocksdb_options`` (the RocksDB backend's
    options: a ``RocksDBOptions`` or a mapping of its fields, strings accepted; checked
    before any task runs), ``parallelism`` (default: the checkpoint's,
    else Spark's default parallelism), ``max_parallelism`` (128), ``event_time`` (a column of
    epoch milliseconds), ``watermark_delay`` (ms), ``end_of_input`` (fire every event-time
    timer), ``broadcast`` (a DataFrame of broadcast elements), ``storage_options``,
    ``initial_state`` (a savepoint seeding the first run), ``retain`` (checkpoints kept, 3),
    ``incremental`` (True: a subtask writes only what changed since the checkpoint it
    continues, whether its live backend was kept or restored at the same parallelism),
    ``executor_cache_bytes`` (what each executor keeps at most of live RocksDB DBs and
    checkpoint files, 4 GiB; 0 keeps none; see the cluster section of the process docs),
    ``rocksdb_format`` (how the
    RocksDB backend is checkpointed: ``"native"``, its SST files, by default, or
    ``"parquet"``, the portable format; see ``CheckpointStorage``), ``job_parameters`` (a dict
    of str to str: what ``RuntimeContext.get_job_parameter`` reads), ``side_outputs`` (the
    ``OutputTag``s the function yields to, or a dict of tag to schema; each is committed with
    the output, read it with :func:`read_side_output`), ``shared_filesystem`` (False: a
    ``file://`` or plain-path ``checkpoint`` is refused, ``[LOCAL_ROOT_NOT_SHARED]``, before any
    task runs when Spark's master is not ``local[...]``, since each host would write its own
    copy; True declares the path shared by every host, such as a network mount). Each call
    applies every broadcast element before its rows (a bounded run of both streams).
    The output DataFrame reads files of the committed checkpoint: consume it before
    ``retain`` later runs have retired that checkpoint.
    """
    job = parse_job(df, key, function, output_schema, checkpoint, uid, options)
    return _output_frame(df.sparkSession, _run(job, OneInput(df), options.get("broadcast"), None), job)


def foreach_batch(
    key: str | Sequence[str],
    function: Any,
    output_schema: Any,
    checkpoint: str,
    uid: str,
    sink: Callable[[Any, int], None] | None = None,
    side_sinks: Mapping[Any, Callable[[Any, int], None]] | None = None,
    **options: Any,
) -> Callable[[Any, int], None]:
    """A ``foreachBatch`` function: each micro-batch is one run recording Spark's batch id.

    The last committed batch id again (Spark replays it after a failure) changes nothing and
    hands its committed output to ``sink`` once more; an earlier one is an error
    (``[BATCH_ID_BEHIND]``: Spark's checkpointLocation was reset or is another query's).
    ``sink(output_df, batch_id)`` gets every committed batch's output (over Spark Connect a
    streaming query calls the function, so ``sink``, in the server's foreachBatch worker). The elements of
    ``broadcast`` are applied once per query, as Flink processes each element of a broadcast
    stream once: with the first micro-batch, and again (all of them) only when they differ
    from those last applied (a digest kept in the checkpoint, so across restarts too).
    ``side_sinks`` maps a declared side output's tag (or id) to a function that gets its
    committed rows as ``sink`` gets the output (after ``sink``; on a replay too). The
    options are those of :func:`process`; a bad ``backend`` or ``rocksdb_options`` fails
    here, before any micro-batch.
    """
    sides = dict(side_sinks or {})
    backend = parse_backend(options)  # a bad backend or RocksDB option fails here, parsed once
    options = {**options, "rocksdb_options": backend.rocksdb}

    def run(batch_df: Any, batch_id: int) -> None:
        job = parse_job(batch_df, key, function, output_schema, checkpoint, uid, options)
        declared = {s.tag_id for s in job.side_outputs}
        unknown = sorted(tag_id_of(tag) for tag in sides if tag_id_of(tag) not in declared)
        if unknown:
            raise ProcessError(
                f"side_sinks name side outputs {unknown} that side_outputs= does not declare "
                f"({sorted(declared)})",
                code="SIDE_OUTPUT_UNKNOWN_TAG",
            )
        spark = batch_df.sparkSession
        committed = _run(job, OneInput(batch_df), options.get("broadcast"), int(batch_id))
        if sink is not None:
            sink(_output_frame(spark, committed, job), int(batch_id))
        for tag, side_sink in sides.items():
            frame = side_frame(spark, committed, job.uid, tag, job.checkpoint, job.storage_options)
            side_sink(frame, int(batch_id))

    return run


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


def _run(job: Job, inputs: Inputs, broadcast: Any, batch_id: int | None) -> CompletedCheckpoint:
    """One run (a micro-batch when ``batch_id`` is given); returns the checkpoint it committed
    (a replayed batch: the one committed before)."""
    spark = inputs.spark
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
    latest = storage.latest_id()
    base = None if latest is None else storage.load(latest, allow_pickle=True)
    props = base.manifest.properties if base is not None else {}
    if batch_id is not None and base is not None:
        done = int(props.get(BATCH_ID, "-1"))
        if batch_id < done:
            raise ProcessError(
                f"micro-batch {batch_id} comes after batch {done} was committed to {job.checkpoint!r}: "
                "Spark replays only the last batch of a query, so this query's checkpointLocation was "
                "reset or belongs to another query, and its batches would be skipped. Restart it with "
                f"the checkpointLocation that committed batch {done}, or give it a new checkpoint root "
                "(initial_state= can seed it from this one)",
                code="BATCH_ID_BEHIND",
            )
        if batch_id == done:
            return base
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
    key_type = inputs.key_type(job)
    op = _check_base(seed, job, key_type, own=seed is base)
    p = job.parallelism or (op.parallelism if op is not None else default_parallelism(spark))
    if not 1 <= p <= job.max_parallelism:
        raise ProcessError(f"parallelism {p} must be in 1..max_parallelism ({job.max_parallelism})")
    ship(spark, job.function)  # before any task: a module the executors lack travels by value
    watermark = int(props.get(WATERMARK, LONG_MIN))
    max_seen = int(props.get(MAX_EVENT_TIME, LONG_MIN))
    run_max = inputs.max_event_time(job)
    max_seen = max_seen if run_max is None else max(max_seen, run_max)
    # as Flink's bounded-out-of-orderness generator emits, and as elements move it in a run:
    # an element at the largest event time may still come, so a timer there must not fire yet
    end_watermark = watermark if max_seen == LONG_MIN else max(watermark, max_seen - job.watermark_delay - 1)
    elements = tuple(broadcast.collect()) if broadcast is not None else ()
    if elements and not isinstance(job.function, KeyedBroadcastProcessFunction):
        raise ProcessError("broadcast elements need a KeyedBroadcastProcessFunction", code="INVALID_FUNCTION")
    digest = props.get(BROADCAST_DIGEST)
    if broadcast is not None:
        applied, digest = digest, _digest(broadcast.schema, elements)
        if batch_id is not None and applied == digest:
            elements = ()  # a streaming query applied exactly these already
    try:  # only the successor of its base: publishing is exclusive, so one run of a base commits
        pending = storage.begin((latest or 0) + 1)
    except CheckpointError as exc:
        if exc.code != "CHECKPOINT_ID_NOT_NEW":
            raise
        raise _concurrent(job, latest, storage.latest_id()) from exc
    token = uuid.uuid4().hex
    plan = TaskPlan(
        job.uid,
        job.function,
        job.backend,
        job.key_columns,
        key_type,
        inputs.value_columns,
        job.event_time,
        p,
        job.max_parallelism,
        pending.target,
        storage.storage.url,
        seed.manifest if seed is not None else None,
        seed.directory if seed is not None else None,
        props.get(TOKEN) if seed is base else None,
        token,
        watermark,
        end_watermark,
        job.watermark_delay,
        job.end_of_input,
        elements,
        job.output,
        job.job_parameters,
        inputs.second,
        job.side_outputs,
        executor_bytes=job.executor_cache_bytes,
    )
    ranges = inputs.ranges(job, key_type, p)
    try:
        ranges = placement.place(ranges, placement.preferred(props, spark, p))
        rows = ranges.mapInArrow(partial(run_subtask, plan), RESULT_SCHEMA.to_string()).collect()
        results = [pickle.loads(row[0]) for row in rows]
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
        raise _task_error(exc, latest) from exc
    now = storage.latest_id()
    if now != latest:
        pending.abort()
        raise _concurrent(job, latest, now)
    by_subtask = {r.entry.index: stats for rs, stats in results for r in rs if r.uid == job.uid}
    properties = {
        WATERMARK: str(end_watermark),
        MAX_EVENT_TIME: str(max_seen),
        TOKEN: " ".join(by_subtask[i]["attempt"] for i in range(p)),
        **start_properties([by_subtask[i] for i in range(p)]),
        **placement.location_properties(spark, [by_subtask[i]["location"] for i in range(p)]),
    }
    if batch_id is not None:
        properties[BATCH_ID] = str(batch_id)
        if digest is not None:
            properties[BROADCAST_DIGEST] = digest
    try:
        committed = pending.commit(properties)
    except CheckpointExistsError as exc:  # another run committed in between (our files are gone)
        raise _concurrent(job, latest, storage.latest_id()) from exc
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


def start_properties(stats: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The checkpoint properties saying how each subtask's backend started and what its
    restore downloaded (``stats``: each subtask's, in order; see :mod:`.live`)."""
    starts = [s["start"] for s in stats]
    out = {REUSED: str(starts.count("warm")), STARTS: " ".join(starts)}
    out[DOWNLOADED] = " ".join(str(s["downloaded"]) for s in stats)
    out[EXECUTORS] = " ".join(s["executor"] or "-" for s in stats)
    return out


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


def _output_frame(spark: Any, checkpoint: CompletedCheckpoint, job: Job) -> Any:
    """The committed output of ``checkpoint`` as a DataFrame of the output schema."""
    uid, struct = output_uid(job.uid), job.output_struct
    return committed_frame(spark, checkpoint, uid, OUTPUT_STATE, struct, job.checkpoint, job.storage_options)
