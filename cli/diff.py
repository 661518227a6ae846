"""``flinkstate diff``: the entries added, removed and changed per state between two snapshots.

Any two of our checkpoints or savepoints, Flink savepoints or retained checkpoints, or one of
each (a Flink savepoint and its ``convert --to flinkstate``). Exit status, as ``diff(1)``: 0
when the states compared are the same, 1 when they differ, 3 on an error.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.text import Text

from flinkstate.checkpoint import DiffSettings, StateChanges, StateName, diff_state, open_side, state_pairs
from flinkstate.state import InvalidArgumentError

from .common import (
    EXIT_CHECK_FAILED,
    JsonFlag,
    StorageOptions,
    guarded,
    out_console,
    pickle_hint,
    storage_options,
)
from .render import jsonable, table, to_json

EXAMPLE = (
    "Example: flinkstate diff /tmp/job/checkpoints /tmp/job/checkpoints --old-checkpoint-id 3 ; "
    "flinkstate diff /tmp/flink-savepoint /tmp/ours --operator counter --state count --key alice"
)
TABLE_LIMIT = 20
"""Change rows a table shows per state by default (JSON prints them all unless --limit is given)."""

SnapshotPath = Annotated[
    str, typer.Argument(help="A checkpoint root (its latest), a chk-<id>, a savepoint, or a Flink savepoint.")
]


def _key(text: str) -> Any:
    """A ``--key``: JSON (``42``, ``["eu", 42]``), or a bare text key (``alice``)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _settings(
    key: list[str] | None, key_group: list[int] | None, state: str | None, compare_ttl: bool, expired: bool
) -> DiffSettings:
    if (key or key_group) and state is None:
        raise InvalidArgumentError(
            "--key and --key-group select entries of one keyed state: name it with --state"
        )
    keys = None if not key else tuple(_key(k) for k in key)
    groups = None if not key_group else frozenset(key_group)
    return DiffSettings(keys, groups, compare_ttl, expired)


@guarded("storage_option", "new_option")
def diff(
    ctx: typer.Context,
    old: SnapshotPath,
    new: SnapshotPath,
    operator: Annotated[str | None, typer.Option("--operator", help="Only this operator (uid).")] = None,
    state: Annotated[str | None, typer.Option("--state", help="Only states of this name.")] = None,
    key: Annotated[
        list[str] | None,
        typer.Option(
            "--key", "-k", help="Only this key (repeatable; JSON for non-text keys). Needs --state."
        ),
    ] = None,
    key_group: Annotated[
        list[int] | None,
        typer.Option("--key-group", "-g", min=0, help="Only this key group (repeatable). Needs --state."),
    ] = None,
    old_checkpoint_id: Annotated[
        int | None, typer.Option("--old-checkpoint-id", min=1, help="A checkpoint under OLD's root.")
    ] = None,
    new_checkpoint_id: Annotated[
        int | None, typer.Option("--new-checkpoint-id", min=1, help="A checkpoint under NEW's root.")
    ] = None,
    compare_ttl: Annotated[
        bool, typer.Option("--compare-ttl", help="A TTL entry whose timestamp alone changed is a change too.")
    ] = False,
    include_expired: Annotated[
        bool, typer.Option("--include-expired", help="Compare TTL-expired entries not yet cleaned up too.")
    ] = False,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            "-n",
            min=0,
            help=f"Change rows per state (0: all; default {TABLE_LIMIT} for tables, all for json).",
        ),
    ] = None,
    as_json: JsonFlag = False,
    allow_pickle: Annotated[
        bool,
        typer.Option(
            "--allow-pickle", help="Load pickled keys and values (runs code: trusted snapshots only)."
        ),
    ] = False,
    storage_option: StorageOptions = None,
    new_option: Annotated[
        list[str] | None,
        typer.Option(
            "--new-option", metavar="KEY=VALUE", help="Storage option for NEW, repeatable (default: -o's)."
        ),
    ] = None,
) -> None:
    """The entries added, removed and changed per state from OLD to NEW; exit 1 when they differ."""
    settings = _settings(key, key_group, state, compare_ttl, include_expired)
    old_options = storage_options(storage_option)
    new_options = storage_options(new_option) if new_option else old_options
    before = open_side(old, old_options, old_checkpoint_id, allow_pickle)
    after = open_side(new, new_options, new_checkpoint_id, allow_pickle)
    pairs = state_pairs(before, after, operator, state)
    names = sorted((*pairs.both, *pairs.only_old, *pairs.only_new), key=lambda s: (s.operator, s.state))
    if not names:
        raise InvalidArgumentError(
            f"no state to compare (operator {operator!r}, state {state!r}) in either snapshot",
            code="UNKNOWN_STATE",
        )
    cap = (TABLE_LIMIT if not as_json else None) if limit is None else (limit or None)
    with pickle_hint():
        results = [diff_state(before, after, s.operator, s.state, settings, cap) for s in names]
    where = {**{_name(s): "old" for s in pairs.only_old}, **{_name(s): "new" for s in pairs.only_new}}
    if as_json:
        typer.echo(to_json(_document(before.label, after.label, results, where)))
    else:
        _print(before.label, after.label, results, where, cap)
    if not all(r.identical for r in results):
        raise typer.Exit(EXIT_CHECK_FAILED)


def _name(s: StateName) -> tuple[str, str]:
    return s.operator, s.state


def _rows(result: StateChanges) -> list[dict[str, Any]]:
    return [{k: jsonable(v) for k, v in row.items()} for t in result.rows for row in t.to_pylist()]


def _document(
    old: str, new: str, results: list[StateChanges], where: dict[tuple[str, str], str]
) -> dict[str, Any]:
    states = []
    for r in results:
        states.append({
            "operator": r.operator, "state": r.state, "in": where.get((r.operator, r.state), "both"),
            "added": r.added, "removed": r.removed, "changed": r.changed, "skipped_key_groups": r.skipped,
            "rows": _rows(r),
        })  # fmt: skip
    return {"old": old, "new": new, "identical": all(r.identical for r in results), "states": states}


def _print(
    old: str, new: str, results: list[StateChanges], where: dict[tuple[str, str], str], cap: int | None
) -> None:
    only = {"old": "only in OLD", "new": "only in NEW"}
    summary = [
        [
            r.operator,
            r.state,
            r.added,
            r.removed,
            r.changed,
            only.get(where.get((r.operator, r.state), ""), ""),
        ]
        for r in results
    ]
    parts: list[Any] = [
        Text(f"OLD: {old}\nNEW: {new}"),
        table(
            "changes per state",
            ["operator", "state", "added", "removed", "changed", "note"],
            summary,
            right=("added", "removed", "changed"),
        ),
    ]
    for r in results:
        rows = _rows(r)
        if rows:
            columns = list(rows[0])
            shown = f" (the first {cap}; --limit 0 shows all)" if cap is not None and len(rows) == cap else ""
            parts.append(
                table(
                    f"{r.operator} / {r.state}{shown}", columns, [[row[c] for c in columns] for row in rows]
                )
            )
    same = all(r.identical for r in results)
    parts.append(Text("identical" if same else "the snapshots differ", style="green" if same else "yellow"))
    out_console().print(Group(*parts))
