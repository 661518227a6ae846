"""A Flink keyed state's rows with ``flatten=false``: one row per key (and namespace) holding
the list or map, as our own checkpoints show it.

A Flink state reads one row per list element (``position``) or map entry (``user_key``);
here a list's elements become the stored layout of our own checkpoints (one row per key
with the list, TTL timestamps as a list beside it) and both go through the one row building
of our views, :func:`flinkstate.checkpoint.views.schemas.keyed_view` with ``flatten=False``.
Other states read the same either way.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flinkstate.state.descriptors import StateKind
from flinkstate.state.keyed.snapshot import StateMetaInfo
from flinkstate.state.ttl import StateTtlConfig, Time
from flinkstate.state.types.typeinfo import ArrowTypeInfo

from ...views.schemas import keyed_view

#: Flink's savepoints do not record a TTL's duration; the view needs only that there is one.
_SOME_TTL = StateTtlConfig.new_builder(Time.milliseconds(1)).build()


def _stored_lists(table: pa.Table) -> pa.Table:
    """One row per key with its elements (rows of a key are adjacent, ``position`` 0 first)."""
    positions = table.column("position").combine_chunks().to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(positions == 0)
    offsets = pa.array(np.append(starts, len(positions)).astype(np.int32), pa.int32())
    heads = pa.array(starts, pa.int64())
    cols = {name: pc.take(table.column(name), heads) for name in ("key_group", "key", "namespace")}
    cols["value"] = pa.ListArray.from_arrays(offsets, table.column("value").combine_chunks())
    if "ttl_timestamp" in table.column_names:
        stamps = table.column("ttl_timestamp").combine_chunks().cast(pa.int64())
        cols["ttl_timestamp"] = pa.ListArray.from_arrays(offsets, stamps)
    return pa.table(cols)


def nested_view(table: pa.Table) -> pa.Table:
    """``table`` (a Flink keyed state's rows) with each list or map in one row."""
    names = table.column_names
    ttl = _SOME_TTL if "ttl_timestamp" in names else None
    value = ArrowTypeInfo(table.schema.field("value").type)
    if "position" in names:
        meta = StateMetaInfo("", StateKind.LIST, value, ttl=ttl)
        return keyed_view(_stored_lists(table), meta, False, None)
    if "user_key" in names:
        user_key = ArrowTypeInfo(table.schema.field("user_key").type)
        meta = StateMetaInfo("", StateKind.MAP, value, user_key, ttl=ttl)
        if ttl is not None:
            stamps = table.column("ttl_timestamp").cast(pa.int64())
            table = table.set_column(names.index("ttl_timestamp"), "ttl_timestamp", stamps)
        return keyed_view(table, meta, False, None)
    return table
