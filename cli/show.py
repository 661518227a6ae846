"""``flinkstate show``: the entries of one state, or of given keys (reading only their key groups)."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from typing import Annotated, Any

import pyarrow as pa
import typer
from rich.console import Group
from rich.text import Text

from flinkstate.checkpoint import (
    CheckpointError,
    CompletedCheckpoint,
    OperatorEntry,
    expiry_cutoff,
    key_group_rows,
    key_groups_of,
    keyed_view_schema,
    keys_of_type,
    operator_rows,
    operator_view_schema,
)
from flinkstate.state import InvalidArgumentError, TypeInformation
from flinkstate.state.operator import OperatorStateMode
from flinkstate.state.types import BasicTypeInfo

from .common import (
    CheckpointId,
    CheckpointPath,
    OperatorUid,
    StorageOptions,
    err_console,
    guarded,
    load,
    out_console,
    storage_options,
)
from .render import csv_lines, jsonable, table

EXAMPLE = (
    "Example: flinkstate show /tmp/my-job/checkpoints counter count --key alice --key bob ; "
    "flinkstate show /tmp/sp orders totals --key '[\"eu\", 42]' --format json  (a ROW key as JSON)"
)
TABLE_LIMIT = 50
"""Rows a table shows by default (JSON and CSV print every row unless --limit is given)."""
CHUNK_KEY_GROUPS = 16
"""Key groups read per request when streaming a state (so a --limit stops reading early)."""


class Format(str, enum.Enum):
    table = "table"
    json = "json"
    csv = "csv"


def parse_key(text: str, key_type: TypeInformation | None) -> Any:
    """A ``--key`` as a key of ``key_type``: JSON (numbers, ``true``, ``[..]``/``{..}`` for ROW
    keys, arrays of byte values); text keys may also be given bare (``alice``)."""
    text_key = isinstance(key_type, BasicTypeInfo) and key_type.name in ("STRING", "CHAR")
    try:
        value = json.loads(text)
    except ValueError:
        if not text_key:
            raise InvalidArgumentError(
                f"--key {text!r} is not JSON; keys of type {key_type} are JSON values "
                '(e.g. 42, true, ["eu", 42] or {"region": "eu", "id": 42} for ROW keys)'
            ) from None
        value = text
    if text_key and not isinstance(value, str):
        value = text
    return keys_of_type([value], key_type, "--key")[0]


def _keyed_rows(
    checkpoint: CompletedCheckpoint,
    op: OperatorEntry,
    state: str,
    keys: list[Any] | None,
    flatten: bool,
    cutoff: int | None,
) -> Iterator[pa.Table]:
    meta = checkpoint.state_meta(op.uid, state)
    stored = sorted({kg for st in op.subtasks for kg in st.stored_key_groups(state)})
    if keys is not None:
        assert op.key_type is not None  # parse_key refuses keys without a key type
        wanted = key_groups_of(keys, op.key_type, op.max_parallelism)
        stored = [kg for kg in stored if kg in wanted]
    for start in range(0, len(stored), CHUNK_KEY_GROUPS):
        chunk = set(stored[start : start + CHUNK_KEY_GROUPS])
        for kg, tables in sorted(checkpoint.read_keyed(op.uid, state, chunk), key=lambda t: t[0]):
            rows = key_group_rows(
                tables,
                kg,
                meta,
                op.key_type,
                keys=keys,
                flatten=flatten,
                expired_before=cutoff,
                allow_pickle=checkpoint.allow_pickle,
            )
            if rows is not None:
                yield rows


def _operator_rows(checkpoint: CompletedCheckpoint, op: OperatorEntry, state: str) -> Iterator[pa.Table]:
    infos = [i for i in op.operator_states if i.name == state]
    broadcast = infos[0].mode is OperatorStateMode.BROADCAST
    for subtask in op.subtasks:
        refs = (subtask.broadcast if broadcast else subtask.operator).get(state, ())
        if refs:
            rows = operator_rows(checkpoint.directory, refs, subtask.index, broadcast)
            if rows is not None:
                yield rows
            if broadcast:  # every subtask holds the same map: show one copy
                return


def _columns(op: OperatorEntry, state: str, flatten: bool) -> list[str]:
    """The view's columns (also what an empty result shows); errors for an unknown state."""
    meta = op.keyed_state(state)
    if meta is not None:
        return list(keyed_view_schema(meta, op.key_type, flatten).names)
    infos = [i for i in op.operator_states if i.name == state]
    if not infos:
        names = sorted({s.name for s in op.keyed_states} | {i.name for i in op.operator_states})
        raise InvalidArgumentError(
            f"operator {op.uid!r} has no state {state!r}; its states: {names}", code="UNKNOWN_STATE"
        )
    if len(infos) > 1:
        raise InvalidArgumentError(
            f"operator {op.uid!r} has a list and a broadcast state both named {state!r}"
        )
    broadcast = infos[0].mode is OperatorStateMode.BROADCAST
    return list(
        operator_view_schema(infos[0].value_type, infos[0].user_key_type if broadcast else None).names
    )


def _limited(tables: Iterator[pa.Table], limit: int | None) -> Iterator[dict[str, Any]]:
    shown = 0
    for t in tables:
        for row in t.to_pylist():
            if limit is not None and shown >= limit:
                return
            shown += 1
            yield row


@guarded("storage_option")
def show(
    ctx: typer.Context,
    path: CheckpointPath,
    operator: OperatorUid,
    state: Annotated[str, typer.Argument(help="The state's name (keyed or operator state).")],
    key: Annotated[
        list[str] | None,
        typer.Option(
            "--key",
            "-k",
            help="Only this key (repeatable); read: only its key group. JSON for "
            "non-text keys, e.g. 42 or '[\"eu\", 42]' for a ROW key.",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            "-n",
            min=0,
            help=f"At most N rows (0: all; default {TABLE_LIMIT} for tables, all for json/csv).",
        ),
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
    checkpoint_id: CheckpointId = None,
    flatten: Annotated[
        bool,
        typer.Option("--flatten/--no-flatten", help="One row per list element / map entry, or one per key."),
    ] = True,
    include_expired: Annotated[
        bool, typer.Option("--include-expired", help="Also show TTL-expired entries not yet cleaned up.")
    ] = False,
    watermark: Annotated[
        int | None,
        typer.Option(
            help="'Now' for event-time TTL states (epoch ms); expired entries are hidden. "
            "Default: the watermark the checkpoint records."
        ),
    ] = None,
    stats: Annotated[bool, typer.Option("--stats", help="Print the bytes and files read on stderr.")] = False,
    allow_pickle: Annotated[
        bool,
        typer.Option(
            "--allow-pickle",
            help="Load pickled values where showing needs them (a state whose files are merged: "
            "incremental checkpoints, upserts). Loading a pickle runs code: only for trusted checkpoints.",
        ),
    ] = False,
    storage_option: StorageOptions = None,
) -> None:
    """The entries of a state, or of the given keys (reading only their key groups)."""
    checkpoint = load(path, storage_options(storage_option), checkpoint_id, allow_pickle)
    op = checkpoint.operator(operator)
    columns = _columns(op, state, flatten)
    before = (checkpoint.directory.bytes_read, checkpoint.directory.files_opened)
    meta = op.keyed_state(state)
    if meta is None:
        if key:
            raise InvalidArgumentError(f"--key selects keyed state; {state!r} is operator state")
        tables = _operator_rows(checkpoint, op, state)
    else:
        keys = None if not key else [parse_key(k, op.key_type) for k in key]
        if watermark is None:  # by default, what a restore of the checkpoint would hide
            watermark = checkpoint.manifest.watermark(op.uid)
        cutoff = None if include_expired else expiry_cutoff(meta, watermark)
        tables = _keyed_rows(checkpoint, op, state, keys, flatten, cutoff)
    cap = (TABLE_LIMIT if fmt is Format.table else None) if limit is None else (limit or None)
    rows = _limited(tables, cap)
    hide = {"namespace"} if meta is None or meta.namespace_type is None else set()
    try:
        shown = _print(rows, columns, fmt, cap, f"{op.uid} / {state}", hide)
    except CheckpointError as exc:
        if exc.code != "PICKLE_NOT_ALLOWED":
            raise
        raise CheckpointError(
            f"state {state!r} holds pickled values that must be loaded to show it, and loading "
            "them runs code: pass --allow-pickle only for a trusted checkpoint",
            code="PICKLE_NOT_ALLOWED",
        ) from exc
    if stats:
        data_read = checkpoint.directory.bytes_read - before[0]
        opened = checkpoint.directory.files_opened - before[1]
        refs = [
            r for st in op.subtasks for g in (st.keyed, st.operator, st.broadcast) for r in g.get(state, ())
        ]
        total = sum(r.size for r in refs)
        err_console().print(
            f"{shown} row{'' if shown == 1 else 's'}; read {data_read} bytes in {opened} files "
            f"(the state has {total} bytes in {len(refs)} files)"
        )


def _print(
    rows: Iterator[dict[str, Any]],
    columns: list[str],
    fmt: Format,
    cap: int | None,
    title: str,
    hide: set[str],
) -> int:
    """Print ``rows``; return how many. A table leaves out the columns in ``hide`` (always null)."""
    shown = 0
    if fmt is Format.json:
        typer.echo("[", nl=False)
        for row in rows:
            sep = "," if shown else ""
            typer.echo(
                f"{sep}\n  " + json.dumps({c: jsonable(row.get(c)) for c in columns}, ensure_ascii=False),
                nl=False,
            )
            shown += 1
        typer.echo("\n]" if shown else "]")
        return shown
    if fmt is Format.csv:
        lines = -1  # the header
        for line in csv_lines(columns, rows):
            typer.echo(line, nl=False)
            lines += 1
        return lines
    columns = [c for c in columns if c not in hide]
    listed = [[row.get(c) for c in columns] for row in rows]
    shown = len(listed)
    note = f"{shown} row{'' if shown == 1 else 's'}" + (
        f" (the first {cap}; --limit 0 shows all)" if cap is not None and shown == cap else ""
    )
    numbers = ("key_group", "subtask", "position")
    out_console().print(Group(table(title, columns, listed, right=numbers), Text(note, style="dim")))
    return shown
