"""The DataFrame views of a checkpoint, in Arrow: schemas and row-group transforms.

Stored row groups (see :mod:`flinkstate.checkpoint.format`) become the rows Spark shows:
keyed state with ``key_group``, ``key``, ``namespace``, the value (lists flattened into
one row per element with its ``position``, maps into one row per entry, unless
``flatten=false``) and ``ttl_timestamp`` for TTL states; operator state with ``subtask``
and ``position`` (or ``key`` for broadcast state).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.state.descriptors import StateKind
from flinkstate.state.keyed.snapshot import StateMetaInfo
from flinkstate.state.types.canonical import key_token
from flinkstate.state.types.mapping import TypeInformation

TTL_TYPE = pa.timestamp("ms", tz="UTC")


def spark_compatible(t: pa.DataType) -> pa.DataType:
    """``t`` with what Spark cannot take from Arrow replaced (TIME of ms -> TIME of us)."""
    if pa.types.is_time32(t):
        return pa.time64("us")
    if pa.types.is_list(t):
        return pa.list_(spark_compatible(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(spark_compatible(t.key_type), spark_compatible(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, spark_compatible(f.type)) for f in t])
    return t


def keyed_view_schema(meta: StateMetaInfo, key_type: TypeInformation | None, flatten: bool) -> pa.Schema:
    """The Arrow schema of a keyed state's view."""
    key = key_type.to_arrow() if key_type is not None else pa.string()
    namespace = meta.namespace_type.to_arrow() if meta.namespace_type is not None else pa.string()
    fields = [pa.field("key_group", pa.int32()), pa.field("key", key), pa.field("namespace", namespace)]
    value = meta.value_type.to_arrow()
    ttl = meta.ttl is not None
    if meta.kind is StateKind.LIST and flatten:
        fields += [pa.field("position", pa.int32()), pa.field("value", value)]
    elif meta.kind is StateKind.LIST:
        fields.append(pa.field("value", pa.list_(value)))
        if ttl:
            fields.append(pa.field("ttl_timestamp", pa.list_(TTL_TYPE)))
            ttl = False
    elif meta.kind is StateKind.MAP and flatten:
        assert meta.user_key_type is not None
        fields += [pa.field("user_key", meta.user_key_type.to_arrow()), pa.field("value", value)]
    elif meta.kind is StateKind.MAP:
        assert meta.user_key_type is not None
        fields.append(pa.field("value", pa.map_(meta.user_key_type.to_arrow(), value)))
        if ttl:
            fields.append(pa.field("ttl_timestamp", pa.map_(meta.user_key_type.to_arrow(), TTL_TYPE)))
            ttl = False
    else:
        fields.append(pa.field("value", value))
    if ttl:
        fields.append(pa.field("ttl_timestamp", TTL_TYPE))
    return pa.schema([pa.field(f.name, spark_compatible(f.type)) for f in fields])


def operator_view_schema(value_type: TypeInformation, key_type: TypeInformation | None) -> pa.Schema:
    value = spark_compatible(value_type.to_arrow())
    if key_type is not None:  # broadcast state
        return pa.schema([pa.field("key", spark_compatible(key_type.to_arrow())), pa.field("value", value)])
    return pa.schema(
        [pa.field("subtask", pa.int32()), pa.field("position", pa.int32()), pa.field("value", value)]
    )


METADATA_SCHEMA = pa.schema(
    [
        pa.field("checkpoint_id", pa.int64()),
        pa.field("operator", pa.string()),
        pa.field("parallelism", pa.int32()),
        pa.field("max_parallelism", pa.int32()),
        pa.field("state", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("key_type", pa.string()),
        pa.field("namespace_type", pa.string()),
        pa.field("user_key_type", pa.string()),
        pa.field("value_type", pa.string()),
        pa.field("ttl", pa.string()),
        pa.field("pickled", pa.bool_()),
        pa.field("rows", pa.int64()),
        pa.field("bytes", pa.int64()),
        pa.field("checkpoint_type", pa.string()),
        pa.field("files", pa.int32()),
        pa.field("delta_files", pa.int32()),
        pa.field("file_checkpoints", pa.list_(pa.int64())),
    ]
)
"""One row per operator and state. ``checkpoint_type``: ``full``, ``incremental`` (it
references files of earlier checkpoints) or ``savepoint``; ``files``/``delta_files``: the
state's data files (all subtasks) and how many of them hold changes over earlier ones;
``file_checkpoints``: the checkpoints that wrote them (empty for older manifests)."""


def _positions(parents: pa.Array) -> pa.Array:
    """Each element's position in its list, from the (ascending) parent row of every element."""
    rows = parents.to_numpy(zero_copy_only=False)
    index = np.arange(len(rows), dtype=np.int64)
    starts = np.ones(len(rows), dtype=bool)
    starts[1:] = rows[1:] != rows[:-1]
    first = np.maximum.accumulate(np.where(starts, index, 0)) if len(rows) else index
    return pa.array((index - first).astype(np.int32), pa.int32())


def keyed_view(table: pa.Table, meta: StateMetaInfo, flatten: bool, expired_before: int | None) -> pa.Table:
    """One row group (stored layout) as view rows; drops entries expired before the cutoff."""
    n = table.num_rows
    cols: dict[str, Any] = {"key_group": table.column("key_group"), "key": table.column("key")}
    cols["namespace"] = (
        table.column("namespace") if "namespace" in table.column_names else pa.nulls(n, pa.string())
    )
    ttl = table.column("ttl_timestamp") if meta.ttl is not None else None
    if meta.kind is StateKind.LIST:
        values = table.column("value").combine_chunks()
        if flatten:
            parents, elements = pc.list_parent_indices(values), pc.list_flatten(values)
            stamps = pc.list_flatten(ttl.combine_chunks()) if ttl is not None else None
            if stamps is not None and expired_before is not None:  # positions count live elements
                live = pc.greater(stamps, pa.scalar(expired_before, pa.int64()))
                parents, elements, stamps = (pc.filter(a, live) for a in (parents, elements, stamps))
            cols = {k: pc.take(v, parents) for k, v in cols.items()}
            cols["position"] = _positions(parents)
            cols["value"] = elements
            if stamps is not None:
                cols["ttl_timestamp"] = stamps
        else:
            cols["value"] = values
            if ttl is not None:
                return _nested_ttl(cols, ttl, expired_before, meta.kind)
    elif meta.kind is StateKind.MAP:
        if flatten:
            cols["user_key"] = table.column("user_key")
            cols["value"] = table.column("value")
            if ttl is not None:
                cols["ttl_timestamp"] = ttl
        else:
            return _fold_maps(cols, table, ttl, expired_before)
    else:
        cols["value"] = table.column("value")
        if ttl is not None:
            cols["ttl_timestamp"] = ttl
    out = pa.table(cols)
    if ttl is not None:
        stamps = out.column("ttl_timestamp")
        if expired_before is not None:
            out = out.filter(pc.greater(stamps, pa.scalar(expired_before, pa.int64())))
        out = out.set_column(
            out.schema.get_field_index("ttl_timestamp"),
            "ttl_timestamp",
            out.column("ttl_timestamp").cast(TTL_TYPE),
        )
    return out


def _nested_ttl(cols: dict[str, Any], ttl: Any, expired_before: int | None, kind: StateKind) -> pa.Table:
    """Lists with per-element timestamps (Python: rare and small)."""
    values = cols["value"].to_pylist()
    stamps = ttl.to_pylist()
    keep_rows, out_values, out_stamps = [], [], []
    for i, (vs, ts) in enumerate(zip(values, stamps, strict=True)):
        pairs = [(v, t) for v, t in zip(vs, ts, strict=True) if expired_before is None or t > expired_before]
        if pairs:
            keep_rows.append(i)
            out_values.append([v for v, _ in pairs])
            out_stamps.append([t for _, t in pairs])
    rows = pa.array(keep_rows, pa.int64())
    result = {k: pc.take(v, rows) for k, v in cols.items() if k != "value"}
    result["value"] = pa.array(out_values, cols["value"].type)
    result["ttl_timestamp"] = pa.array(out_stamps, pa.list_(pa.int64())).cast(pa.list_(TTL_TYPE))
    return pa.table(result)


def _fold_maps(cols: dict[str, Any], table: pa.Table, ttl: Any, expired_before: int | None) -> pa.Table:
    """One row per (key, namespace) with a map column; a scope's rows need not be adjacent
    (the writer sorts by key group only, and several files' rows are concatenated)."""
    keys = table.column("key").to_pylist()
    namespaces = cols["namespace"].to_pylist()
    user_keys = table.column("user_key").combine_chunks()
    values = table.column("value").combine_chunks()
    stamps = ttl.to_pylist() if ttl is not None else None
    scopes: dict[Any, list[int]] = {}
    for i, (key, namespace) in enumerate(zip(keys, namespaces, strict=True)):
        if stamps is not None and expired_before is not None and stamps[i] <= expired_before:
            continue
        scopes.setdefault((key_token(key), key_token(namespace)), []).append(i)
    kept = [i for members in scopes.values() for i in members]
    sizes = np.cumsum([0, *(len(members) for members in scopes.values())])
    rows = pa.array(kept, pa.int64())
    offsets = pa.array(sizes, pa.int32())
    firsts = pa.array([members[0] for members in scopes.values()], pa.int64())
    result = {name: pc.take(cols[name], firsts) for name in ("key_group", "key", "namespace")}
    result["value"] = pa.MapArray.from_arrays(offsets, pc.take(user_keys, rows), pc.take(values, rows))
    if stamps is not None:
        ts = pa.array([stamps[i] for i in kept], pa.int64()).cast(TTL_TYPE)
        result["ttl_timestamp"] = pa.MapArray.from_arrays(offsets, pc.take(user_keys, rows), ts)
    return pa.table(result)
