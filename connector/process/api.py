"""The runner's entry points: ``process`` over a DataFrame, ``foreach_batch`` for a stream
(``coprocess``, two inputs: :mod:`.coprocess`). Each call is one run (:func:`.run.run`) and
returns, or hands its sinks, the output the run committed, read back as a DataFrame."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flinkstate.checkpoint import CompletedCheckpoint
from flinkstate.state.process import tag_id_of

from ..errors import ProcessError
from .committed import committed_frame, side_frame
from .inputs import OneInput
from .job import Job, parse_backend, parse_job
from .names import OUTPUT_STATE, output_uid
from .run import run


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
    return output_frame(df.sparkSession, run(job, OneInput(df), options.get("broadcast"), None), job)


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

    def run_batch(batch_df: Any, batch_id: int) -> None:
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
        committed = run(job, OneInput(batch_df), options.get("broadcast"), int(batch_id))
        if sink is not None:
            sink(output_frame(spark, committed, job), int(batch_id))
        for tag, side_sink in sides.items():
            frame = side_frame(spark, committed, job.uid, tag, job.checkpoint, job.storage_options)
            side_sink(frame, int(batch_id))

    return run_batch


def output_frame(spark: Any, checkpoint: CompletedCheckpoint, job: Job) -> Any:
    """The committed output of ``checkpoint`` as a DataFrame of the output schema."""
    uid, struct = output_uid(job.uid), job.output_struct
    return committed_frame(spark, checkpoint, uid, OUTPUT_STATE, struct, job.checkpoint, job.storage_options)
