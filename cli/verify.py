"""``flinkstate verify``: every file's size and SHA-256 against the manifest.

Exit status 0 only when the manifest (its own checksum) and every file it references hold;
1 when any is missing or corrupt (each is named); 3 when there is nothing to verify.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.text import Text

from flinkstate.checkpoint import (
    METADATA,
    CheckpointCorruptError,
    CheckpointNotFoundError,
    FileRef,
    Manifest,
    Storage,
    check_files,
    completed_ids,
)

from .common import (
    EXIT_CHECK_FAILED,
    CheckpointId,
    CheckpointPath,
    JsonFlag,
    StorageOptions,
    err_console,
    guarded,
    out_console,
    storage_options,
)
from .render import human_bytes, table, to_json

EXAMPLE = (
    "Example: flinkstate verify /tmp/my-job/checkpoints && echo intact ; "
    "flinkstate verify s3://bucket/job/checkpoints --all -o client_kwargs.endpoint_url=http://..."
)


@dataclass(frozen=True)
class _Target:
    """One manifest to check: where it is (relative to the given path) and what it lists."""

    label: str
    directory: Storage
    manifest: Manifest | None
    problem: str | None = None


def _targets(path: str, options: dict[str, Any], checkpoint_id: int | None, every: bool) -> list[_Target]:
    storage = Storage(path, options)
    if checkpoint_id is None and storage.exists(METADATA):
        names = [(".", storage)]
    elif every or checkpoint_id is not None:
        ids = completed_ids(storage)
        if checkpoint_id is not None and checkpoint_id not in ids:
            raise CheckpointNotFoundError(f"no completed checkpoint {checkpoint_id} under {storage!r}")
        names = [(f"chk-{i}", storage.child(f"chk-{i}")) for i in ([checkpoint_id] if checkpoint_id else ids)]
    else:
        ids = completed_ids(storage)
        names = [(f"chk-{ids[-1]}", storage.child(f"chk-{ids[-1]}"))] if ids else []
    if not names:
        raise CheckpointNotFoundError(f"no checkpoint or savepoint at {storage!r}")
    out = []
    for label, directory in names:
        try:
            out.append(_Target(label, directory, Manifest.from_bytes(directory.read_bytes(METADATA), label)))
        except CheckpointCorruptError as exc:
            out.append(_Target(label, directory, None, exc.detail))
    return out


@guarded("storage_option")
def verify(
    ctx: typer.Context,
    path: CheckpointPath,
    checkpoint_id: CheckpointId = None,
    every: Annotated[bool, typer.Option("--all", help="Every completed checkpoint under the root.")] = False,
    as_json: JsonFlag = False,
    storage_option: StorageOptions = None,
) -> None:
    """Check every file's size and SHA-256 against the manifest; exit 0 only if all hold."""
    targets = _targets(path, storage_options(storage_option), checkpoint_id, every)
    problems: list[dict[str, Any]] = [
        {"checkpoint": t.label, "path": METADATA, "problem": t.problem} for t in targets if t.problem
    ]
    files: dict[str, tuple[str, Storage, FileRef]] = {}
    for t in targets:
        for ref in t.manifest.files() if t.manifest is not None else ():
            files.setdefault(
                posixpath.normpath(posixpath.join(t.label, ref.path)), (t.label, t.directory, ref)
            )
    total = sum(ref.size for _, _, ref in files.values())
    console = err_console()
    columns = (
        TextColumn("verifying"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=not console.is_terminal) as progress:
        task = progress.add_task("verify", total=total)
        items = [(directory, ref) for _, directory, ref in files.values()]
        results = check_files(items, lambda n: progress.advance(task, n))
    for (label, _, ref), problem in zip(files.values(), results, strict=True):
        if problem is not None:
            problems.append({"checkpoint": label, "path": ref.path, "problem": problem})
    doc: dict[str, Any] = {
        "checkpoints": [t.label for t in targets],
        "files": len(files),
        "bytes": total,
        "ok": not problems,
        "problems": problems,
    }
    if as_json:
        typer.echo(to_json(doc))
    elif problems:
        rows = [[p["checkpoint"], p["path"], Text(p["problem"], style="red")] for p in problems]
        head = Text(f"{len(problems)} problem(s) in {', '.join(doc['checkpoints'])}:", style="bold red")
        out_console().print(Group(head, table(None, ["checkpoint", "file", "problem"], rows)))
    else:
        out_console().print(
            Text(
                f"OK: {len(files)} files, {human_bytes(total)} in {', '.join(doc['checkpoints'])} "
                "match their manifest's sizes and SHA-256",
                style="green",
            )
        )
    if problems:
        raise typer.Exit(EXIT_CHECK_FAILED)
