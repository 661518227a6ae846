"""The arguments of a ``process`` / ``foreach_batch`` run, checked once against the input."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flinkstate.checkpoint import DEFAULT_CACHE_BYTES
from flinkstate.state import (
    BackendOptions,
    InvalidArgumentError,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    backend_options,
)

from ..errors import ProcessError
from .names import ROUTE, SEQ
from .output import OutputSchema, parse_schema
from .side_outputs import SideOutput, parse_side_outputs

_INTEGRAL = ("tinyint", "smallint", "int", "bigint")


@dataclass(frozen=True)
class Job:
    """A run's arguments, checked once against the input's schema."""

    key_columns: tuple[str, ...]
    function: Any
    output: OutputSchema
    output_struct: Any
    checkpoint: str
    uid: str
    backend: BackendOptions
    """The keyed backend and its RocksDB options (``backend=``, ``rocksdb_options=``)."""
    parallelism: int | None
    max_parallelism: int
    event_time: str | None
    watermark_delay: int
    end_of_input: bool
    storage_options: Mapping[str, Any]
    initial_state: str | None
    retain: int
    incremental: bool
    job_parameters: Mapping[str, str]
    side_outputs: tuple[SideOutput, ...] = ()
    rocksdb_format: str = "parquet"
    """How RocksDB backends are checkpointed (see ``CheckpointStorage``): ``native`` by default."""
    executor_cache_bytes: int = DEFAULT_CACHE_BYTES
    """What each executor keeps at most of live RocksDB DBs and checkpoint files (0: none)."""
    shared_filesystem: bool = False
    """A local checkpoint root is declared shared by every host of a cluster (see
    :mod:`..shared_root`)."""


_OPTIONS = frozenset({
    "backend", "parallelism", "max_parallelism", "event_time", "watermark_delay", "end_of_input",
    "broadcast", "storage_options", "initial_state", "retain", "incremental", "job_parameters",
    "side_outputs", "rocksdb_format", "rocksdb_options", "executor_cache_bytes", "shared_filesystem",
})  # fmt: skip
"""The options of ``process`` / ``foreach_batch`` (``coprocess``: all but ``broadcast``)."""


def parse_job(
    df: Any,
    key: str | Sequence[str],
    function: Any,
    output_schema: Any,
    checkpoint: str,
    uid: str,
    options: Mapping[str, Any],
    two_inputs: bool = False,
) -> Job:
    """``two_inputs``: the arguments of one input of :func:`.coprocess.coprocess` (a
    ``KeyedCoProcessFunction``, no ``broadcast``)."""
    known = _OPTIONS - {"broadcast"} if two_inputs else _OPTIONS
    unknown = sorted(set(options) - known)
    if unknown:
        raise ProcessError(f"unknown option(s) {unknown}; valid: {sorted(known)}")
    keys = _key_columns(df, key)
    _check_function(function, two_inputs)
    struct = _output_struct(df.sparkSession, output_schema)
    event_time = _event_time(df, options.get("event_time"))
    backend = parse_backend(options)
    ints = _numbers(options)
    flags = {n: options.get(n, d) for n, d in (("incremental", True), ("shared_filesystem", False))}
    for name, flag in flags.items():
        if type(flag) is not bool:
            raise ProcessError(f"option {name} must be a bool, got {flag!r}")
    rocksdb_format = options.get("rocksdb_format", "native" if backend.kind == "rocksdb" else "parquet")
    if rocksdb_format not in ("parquet", "native"):
        raise ProcessError(f"option rocksdb_format must be 'parquet' or 'native', got {rocksdb_format!r}")
    job_parameters = _job_parameters(options.get("job_parameters"))
    if not isinstance(uid, str) or not uid or not isinstance(checkpoint, str) or not checkpoint:
        raise ProcessError(f"checkpoint and uid must be non-empty strings, got {checkpoint!r}, {uid!r}")
    return Job(
        key_columns=keys,
        function=function,
        output=OutputSchema.of(struct),
        output_struct=struct,
        checkpoint=checkpoint,
        uid=uid,
        backend=backend,
        parallelism=options.get("parallelism"),
        max_parallelism=ints["max_parallelism"],
        event_time=event_time,
        watermark_delay=ints["watermark_delay"],
        end_of_input=bool(options.get("end_of_input", False)),
        storage_options=dict(options.get("storage_options") or {}),
        initial_state=options.get("initial_state"),
        retain=ints["retain"],
        incremental=flags["incremental"],
        job_parameters=job_parameters,
        side_outputs=parse_side_outputs(df.sparkSession, options.get("side_outputs")),
        rocksdb_format=rocksdb_format,
        executor_cache_bytes=ints["executor_cache_bytes"],
        shared_filesystem=flags["shared_filesystem"],
    )


def _key_columns(df: Any, key: str | Sequence[str]) -> tuple[str, ...]:
    """The key column(s), each a column of the input; the runner's own columns are reserved."""
    keys = (key,) if isinstance(key, str) else tuple(key)
    columns = list(df.columns)
    missing = [k for k in keys if not isinstance(k, str) or k not in columns]
    if not keys or missing:
        raise ProcessError(
            f"key column(s) {missing or keys!r} not in the input's columns {columns}", code="UNKNOWN_COLUMN"
        )
    if SEQ in columns or ROUTE in columns:
        raise ProcessError(f"input columns {SEQ!r} and {ROUTE!r} are reserved", code="UNKNOWN_COLUMN")
    return keys


def _check_function(function: Any, two_inputs: bool) -> None:
    """A keyed (broadcast) process function, or a co-process one for two inputs."""
    one: tuple[type, ...] = (KeyedProcessFunction, KeyedBroadcastProcessFunction)
    if not isinstance(function, (KeyedCoProcessFunction,) if two_inputs else one):
        wanted = (
            "a KeyedCoProcessFunction"
            if two_inputs
            else "a KeyedProcessFunction or KeyedBroadcastProcessFunction"
        )
        hint = (
            " (two keyed inputs: run it with coprocess)"
            if isinstance(function, KeyedCoProcessFunction)
            else ""
        )
        raise ProcessError(f"function must be {wanted}, got {function!r}{hint}", code="INVALID_FUNCTION")


def _output_struct(spark: Any, output_schema: Any) -> Any:
    """The output schema as a ``StructType`` (a DDL string parsed)."""
    from pyspark.sql.types import StructType

    if isinstance(output_schema, str):
        output_schema = parse_schema(spark, output_schema)
    if not isinstance(output_schema, StructType):
        raise ProcessError(f"output_schema must be a StructType or a DDL string, got {output_schema!r}")
    return output_schema


def _event_time(df: Any, event_time: str | None) -> str | None:
    """The event-time column: one of the input's, of epoch milliseconds."""
    if event_time is None:
        return None
    columns = list(df.columns)
    if event_time not in columns:
        raise ProcessError(f"event_time column {event_time!r} not in {columns}", code="UNKNOWN_COLUMN")
    if df.schema[event_time].dataType.simpleString() not in _INTEGRAL:
        raise ProcessError(
            f"event_time column {event_time!r} must hold epoch milliseconds (an integer "
            f"type), not {df.schema[event_time].dataType.simpleString()}"
        )
    return event_time


def _numbers(options: Mapping[str, Any]) -> dict[str, int]:
    """The integer options (their defaults filled in); ``parallelism`` is only checked."""
    ints = {
        n: options.get(n, d) for n, d in (("max_parallelism", 128), ("watermark_delay", 0), ("retain", 3))
    }
    bad = [n for n, v in ints.items() if type(v) is not int or v < (0 if n == "watermark_delay" else 1)]
    parallelism = options.get("parallelism")
    if parallelism is not None and (type(parallelism) is not int or parallelism < 1):
        bad.append("parallelism")
    cache_bytes = options.get("executor_cache_bytes", DEFAULT_CACHE_BYTES)
    if type(cache_bytes) is not int or cache_bytes < 0:
        bad.append("executor_cache_bytes")
    if bad:
        raise ProcessError(
            f"option(s) {bad} must be positive ints (watermark_delay, executor_cache_bytes: >= 0)"
        )
    return {**ints, "executor_cache_bytes": cache_bytes}


def _job_parameters(raw: Any) -> dict[str, str]:
    """Option ``job_parameters``: a mapping of str to str."""
    parameters = raw or {}
    if not isinstance(parameters, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in parameters.items()
    ):
        raise ProcessError(f"option job_parameters must map str to str, got {parameters!r}")
    return dict(parameters)


def parse_backend(options: Mapping[str, Any]) -> BackendOptions:
    """The run's keyed backend from its ``backend`` and ``rocksdb_options`` options."""
    try:
        return backend_options(options.get("backend", "heap"), options.get("rocksdb_options"))
    except InvalidArgumentError as exc:
        raise ProcessError(exc.detail, code=exc.code) from exc
