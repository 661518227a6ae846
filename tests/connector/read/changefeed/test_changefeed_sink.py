"""The change feed of increments written by the streaming sink (``df.writeStream``): list
appends, map-entry puts and deletes, value deletes and nulls, a key touched by several
Spark tasks of one batch, and compactions. Applied to a restore of the checkpoint before
the range, the rows (one per scope or flattened) must give a restore of its end."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from feed_model import Contents, applied, feed, restored
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.pandas.types import from_arrow_schema

from flinkstate.connector.errors import ChangeFeedError
from flinkstate.connector.write.stream import StateSink
from flinkstate.state.descriptors import StateKind

KINDS = {"value": StateKind.VALUE, "list": StateKind.LIST, "map": StateKind.MAP}


def _batch(root: Path, kind: str, batch_id: int, tasks: list[list[tuple[Any, ...]]]) -> None:
    """One micro-batch: each task's rows (key, user key, value, op) as Spark hands them over."""
    options = {"path": str(root), "operator": "op", "state": kind, "statetype": kind, "keycolumns": "k",
               "valuecolumns": "v", "opcolumn": "op", "parallelism": "2", "maxparallelism": "8",
               "retain": "100"}  # fmt: skip
    if kind == "map":
        options["userkeycolumn"] = "uk"
    messages: list[WriterCommitMessage | None] = []
    for part, rows in enumerate(tasks):
        columns: dict[str, Any] = {"k": pa.array([r[0] for r in rows], pa.int64())}
        if kind == "map":
            columns["uk"] = pa.array([r[1] for r in rows], pa.string())
        columns["v"] = pa.array([r[2] for r in rows], pa.int64())
        columns["op"] = pa.array([r[3] for r in rows], pa.string())
        table = pa.table(columns)
        sink = StateSink(options, from_arrow_schema(table.schema))
        message = sink.write(iter(table.to_batches()))
        message.partition = part  # type: ignore[attr-defined]
        messages.append(message)
    sink.commit(messages, batch_id)


def _rows(kind: str, pick: random.Random) -> list[tuple[Any, ...]]:
    out = []
    for _ in range(pick.randrange(1, 6)):
        key = pick.randrange(6)
        user_key = pick.choice("abcd") if kind == "map" else None
        value = None if kind != "list" and pick.random() < 0.1 else pick.randrange(100)
        op = "delete" if pick.random() < 0.25 else "upsert"
        if kind == "map" and op == "delete" and pick.random() < 0.3:
            user_key = None  # the whole map
        out.append((key, user_key, value, op))
    return out


def _job(root: Path, kind: str, seed: int) -> list[int]:
    pick = random.Random(seed)
    for batch_id in range(20):  # past 16 files a subtask's chain is compacted
        _batch(root, kind, batch_id, [_rows(kind, pick) for _ in range(pick.randrange(1, 3))])
    return list(range(1, 21))


def _flat_applied(kind: StateKind, before: Contents, rows: list[dict[str, Any]]) -> dict[Any, Any]:
    """Flattened rows applied: an update sets a list's element at its position, or one entry."""
    after: dict[Any, Any] = {scope: value for scope, (value, _) in before.items()}
    for row in sorted(rows, key=lambda r: (r["checkpoint_id"], r["change_type"] == "update")):
        scope = (row["key"], None)
        if row["change_type"] == "delete":
            after.pop(scope, None)
        elif kind is StateKind.LIST:
            elements = after.setdefault(scope, [])
            elements.extend([None] * (row["position"] + 1 - len(elements)))
            elements[row["position"]] = row["value"]
        elif kind is StateKind.MAP:
            after.setdefault(scope, {})[row["user_key"]] = row["value"]
        else:
            after[scope] = row["value"]
    return after


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("kind", ["value", "list", "map"])
def test_the_feed_of_sink_increments_applied_to_the_start_gives_the_end(
    tmp_path: Path, kind: str, seed: int
) -> None:
    done = _job(tmp_path, kind, seed)
    states = {c: restored(tmp_path, c).get(kind, {}) for c in done}
    states[0] = {}
    for s in done:
        for e in sorted({s, done[-1]}):
            before = states[s - 1]
            try:
                rows = feed(tmp_path, kind, s, e)
            except ChangeFeedError:  # a subtask without a file in the first: no checkpoint before
                assert s == 1
                continue
            assert applied(KINDS[kind], before, rows) == states[e], (s, e)
            flat = feed(tmp_path, kind, s, e, flatten="true")
            assert _flat_applied(KINDS[kind], before, flat) == {sc: v for sc, (v, _) in states[e].items()}


def test_a_map_entry_delete_and_a_list_append(tmp_path: Path) -> None:
    """The audit's cases: an entry delete is not a delete of the whole map; an appended
    element is at its position in the list."""
    batches: list[list[tuple[Any, ...]]] = [
        [(1, "a", 1, "u"), (1, "b", 2, "u")], [(1, "c", 3, "u")], [(1, "a", None, "delete")]
    ]  # fmt: skip
    for batch_id, rows in enumerate(batches):
        _batch(tmp_path / "m", "map", batch_id, [rows])
    flat = feed(tmp_path / "m", "map", 3, flatten="true")
    assert [(r["change_type"], r["user_key"], r["value"]) for r in flat] == [
        ("delete", None, None),
        ("update", "b", 2),
        ("update", "c", 3),
    ]
    for batch_id, value in enumerate([10, 11]):
        _batch(tmp_path / "l", "list", batch_id, [[(1, None, value, "u")]])
    flat = feed(tmp_path / "l", "list", 2, flatten="true")
    assert [(r["change_type"], r["position"], r["value"]) for r in flat] == [
        ("delete", None, None),
        ("update", 0, 10),
        ("update", 1, 11),
    ]
