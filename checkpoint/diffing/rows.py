"""Change rows: the shape of the change feed and of snapshot diffs.

Each row has a state view's columns, ``checkpoint_id`` (the snapshot the change leads to) and
``change_type``: ``delete`` (the scope's columns: ``key_group``, ``key``, ``namespace`` or a
broadcast ``key``; nulls for the rest) or ``update`` (the new rows); deletes come first, and
a changed LIST or MAP is deleted, then written whole.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from flinkstate.state import InvalidArgumentError

FEED_FIELDS = (pa.field("checkpoint_id", pa.int64()), pa.field("change_type", pa.string()))
SCOPE_COLUMNS = ("key_group", "key", "namespace")


def change_schema(view: pa.Schema) -> pa.Schema:
    """The schema of change rows of a view of schema ``view``."""
    return pa.schema([*view, *FEED_FIELDS])


def change_rows(
    deletes: pa.Table | None, updates: pa.Table | None, schema: pa.Schema, checkpoint_id: int | None
) -> pa.Table | None:
    """``deletes`` (rows of which only the scope columns are kept) and ``updates`` (view rows) as
    change rows of ``schema`` (``None``: neither has rows)."""
    parts = []
    for table, change in ((deletes, "delete"), (updates, "update")):
        if table is None or not table.num_rows:
            continue
        n = table.num_rows
        columns: dict[str, Any] = {
            "checkpoint_id": pa.repeat(pa.scalar(checkpoint_id, pa.int64()), n),
            "change_type": pa.repeat(pa.scalar(change), n),
        }
        kept = SCOPE_COLUMNS if change == "delete" else table.column_names
        columns.update((name, table.column(name)) for name in kept if name in table.column_names)
        missing = [f.name for f in schema if change == "update" and f.name not in columns]
        if missing:
            raise InvalidArgumentError(
                f"the schema asks for columns {missing} that this view does not have; it has "
                f"{table.column_names}",
                code="INVALID_OPTION",
            )
        arrays = [columns[f.name].cast(f.type) if f.name in columns else pa.nulls(n, f.type) for f in schema]
        parts.append(pa.Table.from_arrays(arrays, schema=schema))
    return pa.concat_tables(parts) if parts else None
