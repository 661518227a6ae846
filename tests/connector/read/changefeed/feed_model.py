"""The change feed's model: its rows applied to a restore of the checkpoint before the
range must give a restore of the range's last checkpoint."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
from checkpoint_data import dump

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.connector.options import ReadOptions
from flinkstate.connector.read.changefeed.reader import ChangeFeedReader, change_feed_schema, open_range
from flinkstate.state.descriptors import StateKind
from flinkstate.state.ttl.time import ManualTimeProvider

Contents = dict[tuple[Any, Any], Any]
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def feed(
    root: Path | str, state: str, start: int, end: int | None = None, **extra: str
) -> list[dict[str, Any]]:
    """The feed's rows (``flatten=false``: one row per scope) of ``start..end``."""
    options = {"path": str(root), "operator": "op", "state": state, "readChangeFeed": "true",
               "changeStartCheckpointId": str(start), "flatten": "false", **extra}  # fmt: skip
    if end is not None:
        options["changeEndCheckpointId"] = str(end)
    parsed = ReadOptions.parse(options)
    checkpoints = open_range(parsed)
    schema = change_feed_schema(checkpoints[-1].operator("op"), state, parsed.flatten)
    reader = ChangeFeedReader(parsed, checkpoints, schema)
    batches = [b for p in reader.partitions() for b in reader.read(p)]
    return pa.Table.from_batches(batches, schema).to_pylist() if batches else []


def restored(root: Path | str, checkpoint_id: int) -> dict[str, Contents]:
    """State -> (key, namespace) -> (value, TTL timestamp) of a restore at parallelism 1,
    at a time when nothing has expired (so nothing is hidden)."""
    checkpoint = CheckpointStorage(str(root)).load(checkpoint_id)
    backend = checkpoint.keyed_backend("op", 0, 1, time_provider=ManualTimeProvider(0))
    out: dict[str, Contents] = {}
    for (state, key, namespace), entry in dump(backend).items():
        out.setdefault(state, {})[(key, namespace)] = entry
    backend.close()
    return out


def _ms(stamp: Any) -> Any:
    if isinstance(stamp, datetime):
        return (stamp - EPOCH) // timedelta(milliseconds=1)
    if isinstance(stamp, list) and stamp and isinstance(stamp[0], tuple):
        return {k: _ms(v) for k, v in stamp}
    if isinstance(stamp, list):
        return [_ms(v) for v in stamp]
    return stamp


def applied(kind: StateKind, before: Contents, rows: list[dict[str, Any]]) -> Contents:
    """``rows`` applied in checkpoint order (deletes first) to ``before``: a delete removes
    its scope, an update sets a value, appends to a list, puts into a map."""
    after = dict(before)
    for row in sorted(rows, key=lambda r: (r["checkpoint_id"], r["change_type"] == "update")):
        scope = (row["key"], row["namespace"])
        if row["change_type"] == "delete":
            after.pop(scope, None)
            continue
        value, stamp = row["value"], _ms(row.get("ttl_timestamp"))
        if kind is StateKind.MAP:
            values, stamps = after.get(scope, ({}, None if stamp is None else {}))
            after[scope] = ({**values, **dict(value)}, None if stamp is None else {**(stamps or {}), **stamp})
        elif kind is StateKind.LIST:
            values, stamps = after.get(scope, ([], None if stamp is None else []))
            after[scope] = (values + value, None if stamp is None else (stamps or []) + stamp)
        else:
            after[scope] = (value, stamp)
    return after


def kind_of(root: Path | str, checkpoint_id: int, state: str) -> StateKind:
    meta = CheckpointStorage(str(root)).load(checkpoint_id).operator("op").keyed_state(state)
    assert meta is not None
    return meta.kind
