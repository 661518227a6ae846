"""Decoded rows -> Arrow tables with the columns of our own keyed and operator views."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flinkstate.state.keygroups import java_hashed
from flinkstate.state.types.mapping import TypeInformation

from ...arrow_codec import to_arrow
from ..streams.keyed_read import StateRows
from ..types.classes import ROWDATA
from ..types.flink_type import FlinkType

if TYPE_CHECKING:
    from .savepoint import FlinkSavepoint

TTL_TYPE = pa.timestamp("ms", tz="UTC")


def _column(values: list[Any], t: FlinkType | None) -> pa.Array:
    if t is None or t.type_info is None:
        return pa.array(values, pa.string())
    return to_arrow(values, t.type_info)


def arrow_type(t: FlinkType | None) -> pa.DataType:
    if t is None or t.type_info is None:
        return pa.string()
    at: pa.DataType = t.type_info.to_arrow()
    return at


def hashed_key_type(sp: FlinkSavepoint, operator: str, state: str) -> TypeInformation | None:
    """The key type of a keyed state whose Java ``hashCode()`` we compute (basic types), so that
    a key's group is ours; ``None`` for other keys (PyFlink Python state, SQL RowData, Tuple,
    Row, POJO keys hash otherwise in Flink: they still filter rows, but prune no key group)."""
    found = sp.keyed_info(operator, state)
    if found is None or found[1].name != state or found[0].key.snapshot_class == ROWDATA:
        return None
    key_type = found[0].key.type_info
    return key_type if key_type is not None and java_hashed(key_type) else None


def keyed_schema(rows: StateRows, key: FlinkType) -> pa.Schema:
    info = rows.info
    value = info.value.inner if info.value.inner is not None else info.value
    fields = [
        pa.field("key_group", pa.int32()),
        pa.field("key", arrow_type(key)),
        pa.field(
            "namespace", arrow_type(info.namespace if info.namespace and not info.namespace.void else None)
        ),
    ]
    if info.kind == "LIST":
        fields.append(pa.field("position", pa.int32()))
    elif info.kind == "MAP":
        fields.append(pa.field("user_key", arrow_type(info.user_key)))
    fields.append(pa.field("value", arrow_type(value)))
    if info.ttl:
        fields.append(pa.field("ttl_timestamp", TTL_TYPE))
    return pa.schema(fields)


def keyed_table(rows: StateRows, key: FlinkType) -> pa.Table:
    """One row per value, list element (``position``) or map entry (``user_key``)."""
    info = rows.info
    value = info.value.inner if info.value.inner is not None else info.value
    ns = info.namespace if info.namespace is not None and not info.namespace.void else None
    cols = [
        pa.array(rows.key_group, pa.int32()),
        _column(rows.key, key),
        _column(rows.namespace, ns),
    ]
    if info.kind == "LIST":
        cols.append(pa.array(rows.extra, pa.int32()))
    elif info.kind == "MAP":
        cols.append(_column(rows.extra, info.user_key))
    cols.append(_column(rows.value, value))
    if info.ttl:
        cols.append(pa.array(rows.ttl, pa.int64()).cast(TTL_TYPE))
    schema = keyed_schema(rows, key)
    table = pa.Table.from_arrays(cols, schema=schema)
    if not rows.chunks:
        return table
    fast = []
    for kg, keys, values in rows.chunks:
        n = len(keys)
        fast.append(
            pa.Table.from_arrays(
                [pa.repeat(pa.scalar(kg, pa.int32()), n),
                 keys.cast(schema.field("key").type), pa.nulls(n, schema.field("namespace").type),
                 values.cast(schema.field("value").type)],
                schema=schema,
            )
        )  # fmt: skip
    return pa.concat_tables([*fast, table]) if table.num_rows else pa.concat_tables(fast)


def operator_table(subtasks: list[int], positions: list[Any], values: list[Any], t: FlinkType) -> pa.Table:
    """Operator list/union state: ``subtask, position, value``."""
    return pa.table(
        {
            "subtask": pa.array(subtasks, pa.int32()),
            "position": pa.array(positions, pa.int32()),
            "value": _column(values, t),
        }
    )


def broadcast_table(
    subtasks: list[int], keys: list[Any], values: list[Any], k: FlinkType, v: FlinkType
) -> pa.Table:
    """Broadcast state: ``subtask, key, value``."""
    return pa.table(
        {"subtask": pa.array(subtasks, pa.int32()), "key": _column(keys, k), "value": _column(values, v)}
    )
