"""``flinkstate edit``: a savepoint (ours or Flink's) with operators removed or renamed, states
removed or the max parallelism changed, written as a new savepoint of the same format."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer
from rich.console import Group
from rich.text import Text

from flinkstate.checkpoint import (
    EditPlan,
    SavepointEdits,
    edit_checkpoint,
    open_checkpoint,
    plan_checkpoint_edits,
)
from flinkstate.checkpoint.flink import FlinkSavepoint, edit_savepoint, plan_savepoint_edits
from flinkstate.state import InvalidArgumentError

from .common import (
    CheckpointId,
    CheckpointPath,
    FlinkVersion,
    JsonFlag,
    StorageOptions,
    TargetOptions,
    guarded,
    out_console,
    storage_options,
)
from .render import table, to_json

EDIT_EXAMPLE = (
    "Example: flinkstate edit /savepoints/sp-1 /savepoints/sp-2 --rename-operator counter=counter-v2 "
    "--remove-state counter-v2/seen --remove-operator debug-sink --dry-run"
)


def _pair(text: str, sep: str, option: str, shape: str) -> tuple[str, str]:
    first, found, second = text.partition(sep)
    if not found or not first or not second:
        raise InvalidArgumentError(f"{option} expects {shape}, got {text!r}", code="INVALID_OPTION")
    return first, second


def parse_edits(
    remove_operator: list[str] | None,
    rename_operator: list[str] | None,
    remove_state: list[str] | None,
    max_parallelism: int | None,
) -> SavepointEdits:
    """The command line's edits, in one value; none at all is ``[INVALID_OPTION]``."""
    edits = SavepointEdits()
    for uid in remove_operator or ():
        edits = edits.remove_operator(uid)
    for text in rename_operator or ():
        edits = edits.rename_operator(*_pair(text, "=", "--rename-operator", "OLD=NEW"))
    for text in remove_state or ():
        edits = edits.remove_state(*_pair(text, "/", "--remove-state", "UID/STATE"))
    if max_parallelism is not None:
        edits = edits.with_max_parallelism(max_parallelism)
    if edits.is_empty():
        raise InvalidArgumentError(
            "nothing to edit: give --remove-operator, --rename-operator, --remove-state or --max-parallelism",
            code="INVALID_OPTION",
        )
    return edits


@guarded("storage_option", "target_option")
def edit(
    ctx: typer.Context,
    source: CheckpointPath,
    target: Annotated[str, typer.Argument(help="A new savepoint directory (must not hold one yet).")],
    remove_operator: Annotated[
        list[str] | None,
        typer.Option("--remove-operator", metavar="UID", help="Remove an operator, repeatable."),
    ] = None,
    rename_operator: Annotated[
        list[str] | None,
        typer.Option("--rename-operator", metavar="OLD=NEW", help="Change an operator's uid, repeatable."),
    ] = None,
    remove_state: Annotated[
        list[str] | None,
        typer.Option(
            "--remove-state", metavar="UID/STATE", help="Remove a keyed or operator state, repeatable."
        ),
    ] = None,
    max_parallelism: Annotated[
        int | None,
        typer.Option("--max-parallelism", "-m", min=1, help="Every operator's new max parallelism."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check the edits and show what would change; write nothing.")
    ] = False,
    flink_version: FlinkVersion = None,
    checkpoint_id: CheckpointId = None,
    as_json: JsonFlag = False,
    storage_option: StorageOptions = None,
    target_option: TargetOptions = None,
) -> None:
    """Edit a savepoint offline (what Flink's SavepointWriter edits) into a new savepoint of the
    same format: one of ours, or a canonical Flink savepoint Flink restores (the release
    ``--flink-version`` names; by default, for a Flink 1.x savepoint, the oldest release it can be
    from, so its own Flink restores it; else the newest).

    Edits name operators by their uid in SOURCE (a Flink operator also by id or name);
    renames apply last. Bad edits (an unknown operator or state, two operators with one
    uid, ...) are refused before anything is written. The source is not changed.
    """
    edits = parse_edits(remove_operator, rename_operator, remove_state, max_parallelism)
    options = storage_options(storage_option)
    checkpoint = open_checkpoint(source, options, checkpoint_id)
    target_options = storage_options(target_option) if target_option else options
    plan: EditPlan
    if isinstance(checkpoint, FlinkSavepoint):
        fmt, source_id = "flink", checkpoint.meta.checkpoint_id
        plan = plan_savepoint_edits(checkpoint, edits, flink_version)
        if not dry_run:
            edit_savepoint(checkpoint, target, edits, storage=target_options, flink_version=flink_version)
    else:
        if flink_version is not None:
            raise InvalidArgumentError(
                "--flink-version applies to a Flink savepoint; SOURCE is one of ours", code="INVALID_OPTION"
            )
        fmt, source_id = "flinkstate", checkpoint.checkpoint_id
        plan = plan_checkpoint_edits(checkpoint, edits)
        if not dry_run:
            edit_checkpoint(checkpoint, target, edits, target_options)
    changes = [asdict(c) for c in plan.changes]
    doc = {"source_checkpoint_id": source_id, "format": fmt, "target": target, "dry_run": dry_run,
           "changes": changes}  # fmt: skip
    if as_json:
        typer.echo(to_json(doc))
        return
    verb = "would write" if dry_run else "wrote"
    what = "Flink savepoint" if fmt == "flink" else "savepoint"
    head = Text(
        f"{verb} {what} {target} from checkpoint {source_id}: {len(changes)} change(s)", style="green"
    )
    rows = [[c["action"], c["operator"], c["state"], c["before"], c["after"]] for c in changes]
    columns = ["change", "operator", "state", "before", "after"]
    out_console().print(Group(head, table(None, columns, rows)))
