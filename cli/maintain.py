"""``flinkstate rescale`` (the offline max-parallelism rewrite), ``flinkstate gc`` (retention) and
``flinkstate rollback`` (a new checkpoint equal to a retained one)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.text import Text

from flinkstate.checkpoint import (
    DEFAULT_GRACE,
    MIN_GRACE,
    CheckpointNotFoundError,
    CheckpointStorage,
    Storage,
    rewrite_max_parallelism,
    rollback,
)
from flinkstate.state import InvalidArgumentError

from .common import (
    CheckpointId,
    CheckpointPath,
    JsonFlag,
    StorageOptions,
    TargetOptions,
    counting_bars,
    guarded,
    load,
    out_console,
    storage_options,
)
from .render import human_bytes, table, to_json

RESCALE_EXAMPLE = (
    "Example: flinkstate rescale /tmp/my-job/checkpoints /tmp/savepoints/mp-256 --max-parallelism 256"
)
GC_EXAMPLE = "Example: flinkstate gc /tmp/my-job/checkpoints --retain 2 --older-than 3d --dry-run"
ROLLBACK_EXAMPLE = "Example: flinkstate rollback /tmp/my-job/checkpoints --to 12 --dry-run"


@guarded("storage_option", "target_option")
def rescale(
    ctx: typer.Context,
    source: CheckpointPath,
    target: Annotated[str, typer.Argument(help="A new savepoint directory (must not hold one yet).")],
    max_parallelism: Annotated[
        int,
        typer.Option(
            "--max-parallelism", "-m", min=1, help="The new max parallelism (number of key groups)."
        ),
    ],
    checkpoint_id: CheckpointId = None,
    as_json: JsonFlag = False,
    storage_option: StorageOptions = None,
    target_option: TargetOptions = None,
) -> None:
    """Rewrite a checkpoint into a new savepoint with another max parallelism (every key reassigned).

    Operators keep their parallelism (capped at the new max parallelism); raw keyed state
    cannot be moved and is an error. The source is not changed.
    """
    options = storage_options(storage_option)
    source_checkpoint = load(source, options, checkpoint_id)
    target_options = storage_options(target_option) if target_option else options
    with counting_bars("rows") as bar:
        advance = bar("rewriting")
        result = rewrite_max_parallelism(source_checkpoint, target, max_parallelism, target_options, advance)
    before = {op.uid: op for op in source_checkpoint.manifest.operators}
    operators: list[dict[str, Any]] = [
        {
            "uid": op.uid,
            "parallelism": [before[op.uid].parallelism, op.parallelism],
            "max_parallelism": [before[op.uid].max_parallelism, op.max_parallelism],
            "rows": sum(f.rows for st in op.subtasks for fs in st.keyed.values() for f in fs),
            "bytes": sum(f.size for st in op.subtasks for f in st.files()),
        }
        for op in result.manifest.operators
    ]
    written = result.directory.safe_url
    doc = {"source_checkpoint_id": source_checkpoint.checkpoint_id, "target": written, "operators": operators}
    if as_json:
        typer.echo(to_json(doc))
        return
    rows = [
        [
            o["uid"],
            "{} -> {}".format(*o["parallelism"]),
            "{} -> {}".format(*o["max_parallelism"]),
            o["rows"],
            human_bytes(o["bytes"]),
        ]
        for o in operators
    ]
    head = Text(f"wrote savepoint {written} from checkpoint {source_checkpoint.checkpoint_id}", style="green")
    columns_out = ["operator", "parallelism", "max parallelism", "keyed rows", "bytes"]
    out_console().print(Group(head, table(None, columns_out, rows, right=("keyed rows", "bytes"))))


def _size(storage: Storage, path: str) -> int | None:
    """A file's size, ``None`` when it is gone already (another cleanup ran meanwhile)."""
    try:
        return storage.size(path)
    except FileNotFoundError:
        return None


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")


def parse_duration(text: str) -> timedelta:
    """``90m``, ``2h``, ``3d``, ``45s`` (or ``1.5h``) as a timedelta; else ``[INVALID_OPTION]``."""
    match = _DURATION.match(text)
    if match is None:
        raise InvalidArgumentError(
            f"--older-than expects a number and a unit (s, m, h, d), e.g. 90m, 2h, 3d; got {text!r}",
            code="INVALID_OPTION",
        )
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def format_duration(span: timedelta) -> str:
    """``span`` in the largest unit that divides it: ``24h``, ``90m``, ``3d``."""
    seconds = span.total_seconds()
    for unit in ("d", "h", "m"):
        if seconds and seconds % _UNITS[unit] == 0:
            return f"{int(seconds // _UNITS[unit])}{unit}"
    return f"{seconds:g}s"


@guarded("storage_option")
def gc(
    ctx: typer.Context,
    root: Annotated[str, typer.Argument(help="A checkpoint root (holding chk-<id> directories).")],
    retain: Annotated[
        int, typer.Option("--retain", "-r", min=1, help="How many completed checkpoints to keep.")
    ],
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            help="Delete a file no manifest references (perhaps a running job's, not yet committed) "
            f"only when last modified longer ago than this: 90m, 2h, 3d. Below {format_duration(MIN_GRACE)} "
            "needs --force-short-grace.",
        ),
    ] = format_duration(DEFAULT_GRACE),
    force_short_grace: Annotated[
        bool,
        typer.Option(
            "--force-short-grace",
            help=f"Allow --older-than below {format_duration(MIN_GRACE)}: only when no job writes to ROOT.",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be deleted; delete nothing.")
    ] = False,
    as_json: JsonFlag = False,
    storage_option: StorageOptions = None,
) -> None:
    """Keep the last N completed checkpoints and delete the rest: older checkpoints, abandoned
    attempts and files no kept checkpoint references (reference-aware: shared files stay).

    Nothing newer than the newest completed checkpoint is touched (it may be in progress). A
    file no manifest references at all (under _data, or of an attempt with no manifest) may
    be a running job's, written but not yet committed: it goes only when older than
    --older-than (as Iceberg's orphan-file removal and Delta's VACUUM do); a filesystem that
    gives no modification time keeps it.
    """
    grace = parse_duration(older_than)
    checkpoints = CheckpointStorage(root, storage_options(storage_option), retain=retain)
    done = checkpoints.completed_ids()
    if not done:
        raise CheckpointNotFoundError(
            f"no completed checkpoint under {checkpoints.storage!r}: nothing to keep"
        )
    with counting_bars("files") as bar:
        planned = checkpoints.cleanup(True, grace, force_short_grace, bar("scanning"))
        sizing = bar("sizing")
        sizes: dict[str, int | None] = {}
        sizing(0, len(planned.deleted))
        for path in planned.deleted:
            sizes[path] = _size(checkpoints.storage, path)
            sizing(len(sizes), len(planned.deleted))
        if dry_run:
            garbage = planned
        else:
            garbage = checkpoints.cleanup(False, grace, force_short_grace, bar("deleting"))
    deleted = garbage.deleted
    freed = sum(sizes.get(path) or 0 for path in deleted)
    doc: dict[str, Any] = {
        "root": checkpoints.storage.safe_url,
        "dry_run": dry_run,
        "older_than_seconds": grace.total_seconds(),
        "kept": done[-retain:],
        "removed_checkpoints": [i for i in done if i not in done[-retain:]],
        "files": [{"path": p, "bytes": sizes.get(p)} for p in deleted],
        "bytes": freed,
        "young": list(garbage.young),
        "undated": list(garbage.undated),
    }
    if as_json:
        typer.echo(to_json(doc))
        return
    verb = "would delete" if dry_run else "deleted"
    kept = ", ".join(f"chk-{i}" for i in doc["kept"])
    head = Text(
        f"keeping {kept}; {verb} {len(deleted)} files, {human_bytes(freed)}",
        style="yellow" if dry_run else "green",
    )
    rows = [[p["path"], human_bytes(p["bytes"]) if p["bytes"] is not None else "-"] for p in doc["files"]]
    parts: list[Any] = [head] + ([table(None, ["file", "size"], rows, right=("size",))] if rows else [])
    if garbage.young:
        parts.append(
            Text(
                f"kept {len(garbage.young)} unreferenced files modified within {format_duration(grace)} "
                "(a running job may still commit them; see --older-than)"
            )
        )
    if garbage.undated:
        parts.append(
            Text(
                f"kept {len(garbage.undated)} unreferenced files: the filesystem gives no modification "
                "time, so their age is unknown"
            )
        )
    out_console().print(Group(*parts))


@guarded("storage_option")
def rollback_root(
    ctx: typer.Context,
    root: Annotated[str, typer.Argument(help="A checkpoint root (holding chk-<id> directories).")],
    to: Annotated[int, typer.Option("--to", min=1, help="The retained checkpoint to roll back to.")],
    retain: Annotated[
        int | None,
        typer.Option("--retain", "-r", min=1, help="Then keep only the last N completed checkpoints."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Verify the checkpoint, say what would happen, write nothing."),
    ] = False,
    as_json: JsonFlag = False,
    storage_option: StorageOptions = None,
) -> None:
    """Publish a new checkpoint equal to retained checkpoint --to (its files referenced, not copied).

    Nothing is deleted: the checkpoints after it stay (retention applies as to any commit).
    The checkpoint must verify whole first. A run that started before the rollback fails to
    commit ([CONCURRENT_RUN]) rather than build on the state it replaced; the next run
    restores from the new checkpoint.
    """
    storage = Storage(root, storage_options(storage_option))
    done = rollback(storage, to, dry_run=dry_run, retain=retain)
    doc = {
        "root": storage.safe_url,
        "dry_run": dry_run,
        "to": done.to,
        "previous": done.previous,
        "checkpoint_id": done.version,
        "files": done.files,
        "bytes": done.bytes,
    }
    if as_json:
        typer.echo(to_json(doc))
        return
    verb = "would publish" if dry_run else "published"
    out_console().print(
        Text(
            f"{verb} checkpoint {done.version} equal to checkpoint {done.to} (the latest was "
            f"{done.previous}); {done.files} files, {human_bytes(done.bytes)} verified",
            style="yellow" if dry_run else "green",
        )
    )
