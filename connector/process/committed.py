"""A run's committed output read back as DataFrames: the main output a run returns, and its
side outputs (:func:`read_side_output`, or a side sink of ``foreach_batch``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.state import OutputTag
from flinkstate.state.process import tag_id_of

from ..errors import ProcessError
from .names import SIDE_PREFIX, output_uid, side_state


def committed_frame(
    spark: Any,
    checkpoint: CompletedCheckpoint,
    uid: str,
    state: str,
    struct: Any,
    root: str,
    storage_options: Mapping[str, Any],
) -> Any:
    """The rows of the list state ``state`` of the operator ``uid`` (``<run uid>/output``) of
    ``checkpoint`` (under ``root``), as a DataFrame of ``struct``."""
    from pyspark.sql.types import LongType, StructField, StructType

    op = checkpoint.operator(uid)
    refs = [f for st in op.subtasks for f in st.operator.get(state, ())]
    directory = checkpoint.directory
    if not refs:
        return spark.createDataFrame([], struct)
    if directory.is_local:
        stored = StructType([StructField("position", LongType()), StructField("value", struct)])
        paths = ["file://" + directory.path(r.path) for r in refs]
        return spark.read.schema(stored).parquet(*paths).select("value.*")
    reader = spark.read.format("flinkstate").option("operator", uid).option("state", state)
    reader = reader.option("checkpointId", str(checkpoint.checkpoint_id))
    for name, value in fs_options(storage_options).items():
        reader = reader.option(name, value)
    return reader.load(root).select("value.*")


def side_frame(
    spark: Any,
    checkpoint: CompletedCheckpoint,
    uid: str,
    tag: OutputTag | str,
    root: str,
    storage_options: Mapping[str, Any],
) -> Any:
    """The side output ``tag`` of the run ``uid`` committed as ``checkpoint``; its schema is
    the one the run declared (kept in the checkpoint)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    tag_id = tag_id_of(tag)
    op = checkpoint.operator(output_uid(uid))
    found = {s.name: s for s in op.operator_states if s.name.startswith(SIDE_PREFIX)}
    info = found.get(side_state(tag_id))
    if info is None:
        declared = sorted(name[len(SIDE_PREFIX) :] for name in found)
        raise ProcessError(
            f"checkpoint {checkpoint.checkpoint_id} of run {uid!r} has no side output {tag_id!r} "
            f"(it has {declared})",
            code="SIDE_OUTPUT_UNKNOWN_TAG",
        )
    arrow = info.value_type.to_arrow()
    struct = from_arrow_schema(pa.schema([arrow.field(i) for i in range(arrow.num_fields)]))
    return committed_frame(spark, checkpoint, output_uid(uid), info.name, struct, root, storage_options)


def read_side_output(
    spark: Any,
    checkpoint: str,
    uid: str,
    tag: OutputTag | str,
    *,
    checkpoint_id: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Any:
    """The side output ``tag`` (a tag or its id) of the run ``uid`` committed under the root
    ``checkpoint`` (its latest checkpoint, or ``checkpoint_id``), as a DataFrame."""
    options = dict(storage_options or {})
    loaded = CheckpointStorage(checkpoint, options).load(checkpoint_id)
    return side_frame(spark, loaded, uid, tag, checkpoint, options)


def fs_options(options: Mapping[str, Any], prefix: str = "fs.") -> dict[str, str]:
    """Storage options as the data source's ``fs.*`` options (nested dicts flattened)."""
    out: dict[str, str] = {}
    for name, value in options.items():
        if isinstance(value, Mapping):
            out.update(fs_options(value, f"{prefix}{name}."))
        else:
            out[prefix + name] = value if isinstance(value, str) else json.dumps(value)
    return out
