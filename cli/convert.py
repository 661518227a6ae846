"""``flinkstate convert``: a checkpoint or savepoint (ours, or Flink's read) as a canonical Flink
savepoint (``--to flink``), or a Flink savepoint as one of ours (``--to flinkstate``)."""

from __future__ import annotations

import uuid
from enum import Enum
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.text import Text

from flinkstate.checkpoint import CheckpointError, CompletedCheckpoint, Storage, open_checkpoint
from flinkstate.checkpoint.flink import (
    PICKLED_KEY,
    FlinkSavepoint,
    StatePlan,
    UnsupportedFlinkWriteError,
    convert_plan,
    import_savepoint,
    operator_id_hex,
    write_savepoint,
)
from flinkstate.state import InvalidArgumentError

from .common import (
    CheckpointId,
    CheckpointPath,
    FlinkVersion,
    JsonFlag,
    StorageOptions,
    TargetOptions,
    counting_bars,
    guarded,
    out_console,
    storage_options,
)
from .render import human_bytes, table, to_json

CONVERT_EXAMPLE = (
    "Example: flinkstate convert /tmp/my-job/checkpoints /tmp/savepoints/for-flink --to flink "
    "--operator counter --parallelism 4; "
    "flinkstate convert /tmp/flink-savepoint /tmp/savepoints/ours --to flinkstate"
)


class Target(str, Enum):
    flink = "flink"
    flinkstate = "flinkstate"


class PyFlinkMode(str, Enum):
    process = "process"
    thread = "thread"


def _pyflink_mode(mode: PyFlinkMode | None, pickled_keys: bool) -> str | None:
    if mode is None:
        if pickled_keys:
            raise InvalidArgumentError("--pickled-keys needs --pyflink-mode")
        return None
    return f"{mode.value}{PICKLED_KEY if pickled_keys else ''}"


def _describe(sp: FlinkSavepoint) -> list[dict[str, Any]]:
    out = []
    for op in sp.meta.operators:
        handles = [h for s in op.subtasks for h in (s.managed_keyed, s.managed_operator) if h and h.stream]
        states = sorted({s.name for s in sp.states() if s.operator_id == op.operator_id})
        out.append(
            {
                "operator_id": op.operator_id,
                "parallelism": op.parallelism,
                "max_parallelism": op.max_parallelism,
                "states": states,
                "inline_bytes": sum(h.stream.size for h in handles if h.stream and h.stream.kind == "bytes"),
                "file_bytes": sum(h.stream.size for h in handles if h.stream and h.stream.kind != "bytes"),
            }
        )
    return out


@guarded("storage_option", "target_option")
def convert(
    ctx: typer.Context,
    source: CheckpointPath,
    target: Annotated[str, typer.Argument(help="A new savepoint directory (must not hold one yet).")],
    to: Annotated[
        Target,
        typer.Option(
            "--to", help="The format to write: Flink's canonical savepoint, or ours (from a Flink one)."
        ),
    ],
    operator: Annotated[
        list[str] | None,
        typer.Option("--operator", help="An operator uid to write, repeatable (default: all)."),
    ] = None,
    parallelism: Annotated[
        int | None,
        typer.Option("--parallelism", "-p", min=1, help="Every operator's parallelism (default: as is)."),
    ] = None,
    max_parallelism: Annotated[
        int | None, typer.Option("--max-parallelism", "-m", min=1, help="Every operator's max parallelism.")
    ] = None,
    inline_threshold: Annotated[
        int, typer.Option("--inline-threshold", min=0, help="State streams up to this many bytes go inline.")
    ] = 20 * 1024,
    uid: Annotated[
        list[str] | None,
        typer.Option(
            "--uid",
            help="--to flinkstate: a uid naming the operator whose savepoint records only its hash "
            "(repeatable).",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Encode and check everything, show what would be written; write nothing."
        ),
    ] = False,
    pyflink_mode: Annotated[
        PyFlinkMode | None,
        typer.Option(
            "--pyflink-mode",
            help="Write the keyed state as PyFlink Python state for a PyFlink job in this execution mode.",
        ),
    ] = None,
    pickled_keys: Annotated[
        bool,
        typer.Option(
            "--pickled-keys", help="With --pyflink-mode: the job's key_by has no key_type (keys are pickled)."
        ),
    ] = False,
    allow_pickle: Annotated[
        bool,
        typer.Option(
            "--allow-pickle",
            help="Load pickled values to write them (PyFlink's PICKLED_BYTE_ARRAY state). Loading a pickle "
            "runs code: only for trusted checkpoints.",
        ),
    ] = False,
    flink_version: FlinkVersion = None,
    declared_type: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            metavar="STATE=TYPE",
            help="A Flink savepoint's state's declared type, repeatable: a Kryo class as a STRUCT of its "
            "fields, a POJO's Kryo List fields as STRUCT<tags: ARRAY<STRING>> (what 1.x -> 2.x re-encodes).",
        ),
    ] = None,
    checkpoint_id: CheckpointId = None,
    as_json: JsonFlag = False,
    storage_option: StorageOptions = None,
    target_option: TargetOptions = None,
) -> None:
    """Write a checkpoint or savepoint (ours, or a Flink savepoint read) as a canonical Flink
    savepoint that Flink restores (``flink run -s TARGET``; the release ``--flink-version``
    names, by default the newest, or for a Flink 1.x savepoint the oldest release it can be
    from), operators matched by uid; or
    (``--to flinkstate``) a Flink savepoint as one of our savepoints; with ``--pyflink-mode``, our
    operators' keyed state as a PyFlink job keeps Python state.

    What cannot be written (see docs/flink/write.md) is refused before any file is written. The
    source is not changed. With ``--dry-run`` a Flink savepoint's states are listed as written,
    re-encoded (Kryo 2 -> 5, POJO List fields), carried as bytes or refused (with why).
    """
    options = storage_options(storage_option)
    types = _declared(declared_type)
    checkpoint = open_checkpoint(source, options, checkpoint_id, allow_pickle, types or None)
    if types and not isinstance(checkpoint, FlinkSavepoint):
        raise InvalidArgumentError("--type declares a Flink savepoint's types", code="INVALID_OPTION")
    target_options = storage_options(target_option) if target_option else options
    where, where_options = target, target_options
    if dry_run:  # written in memory, read back, dropped
        where, where_options = f"memory://flinkstate-convert-dry-run/{uuid.uuid4().hex}", {}
    if to is Target.flinkstate:
        given = [
            n
            for n, v in (
                ("--parallelism", parallelism),
                ("--max-parallelism", max_parallelism),
                ("--flink-version", flink_version),
            )
            if v
        ]
        if given:
            raise InvalidArgumentError(f"{given[0]} applies to --to flink only", code="INVALID_OPTION")
        _to_ours(checkpoint, target, (where, where_options), operator, uid or [], dry_run, as_json)
        return
    plan = (
        convert_plan(checkpoint, flink_version, operator)
        if dry_run and isinstance(checkpoint, FlinkSavepoint)
        else []
    )
    refused = [p for p in plan if p.action == "refused"]
    if refused:
        _print_plan(plan, target, as_json)
        raise UnsupportedFlinkWriteError(
            f"{len(refused)} of {len(plan)} states would be refused (listed above); nothing was written"
        )
    try:
        with counting_bars("subtask steps") as bar:
            sp = write_savepoint(
                checkpoint, where, parallelism=parallelism, max_parallelism=max_parallelism,
                operators=operator, storage=where_options, inline_threshold=inline_threshold,
                pyflink_mode=_pyflink_mode(pyflink_mode, pickled_keys), flink_version=flink_version,
                progress=bar("encoding, writing" if not dry_run else "encoding, checking"),
            )  # fmt: skip
        operators = _describe(sp)
    finally:
        if dry_run:
            memory = Storage(where, where_options)
            memory.fs.rm(memory.path(""), recursive=True)
    if isinstance(checkpoint, FlinkSavepoint):
        uids = {o.operator_id: o.uid for o in checkpoint.meta.operators}
        source_id = checkpoint.meta.checkpoint_id
    else:
        uids = {operator_id_hex(o.uid): o.uid for o in checkpoint.manifest.operators}
        source_id = checkpoint.checkpoint_id
    for o in operators:
        o["uid"] = uids.get(o["operator_id"], "")
    doc = {"source_checkpoint_id": source_id, "target": target, "to": to.value,
           "dry_run": dry_run, "operators": operators}  # fmt: skip
    if plan:
        doc["states"] = [_plan_row(p) for p in plan]
    if as_json:
        typer.echo(to_json(doc))
        return
    rows = [
        [o["uid"], o["operator_id"], o["parallelism"], o["max_parallelism"], ", ".join(o["states"]),
         human_bytes(o["inline_bytes"]), human_bytes(o["file_bytes"])]
        for o in operators
    ]  # fmt: skip
    verb = "would write" if dry_run else "wrote"
    head = Text(f"{verb} Flink savepoint {target} from checkpoint {source_id}", style="green")
    columns = ["operator", "operator id", "parallelism", "max parallelism", "states", "inline", "files"]
    out_console().print(Group(head, table(None, columns, rows, right=("inline", "files"))))
    if plan:
        _print_plan(plan, None, False)


def _declared(pairs: list[str] | None) -> dict[str, str]:
    """``--type STATE=TYPE`` texts by state name."""
    out = {}
    for pair in pairs or ():
        name, sep, ddl = pair.partition("=")
        if not sep or not name.strip() or not ddl.strip():
            raise InvalidArgumentError(f"--type expects STATE=TYPE, not {pair!r}", code="INVALID_OPTION")
        out[name.strip()] = ddl.strip()
    return out


def _plan_row(p: StatePlan) -> dict[str, str]:
    return {"operator": p.operator, "state": p.state, "kind": p.kind, "action": p.action, "detail": p.detail}


def _print_plan(plan: list[StatePlan], target: str | None, as_json: bool) -> None:
    """Each state's fate in a dry run (alone, ``target`` named, when some are refused)."""
    if as_json:
        typer.echo(to_json({"target": target, "dry_run": True, "states": [_plan_row(p) for p in plan]}))
        return
    rows = [[p.operator, p.state, p.kind, p.action, p.detail] for p in plan]
    head = Text(f"would write Flink savepoint {target}: per state" if target else "per state", style="green")
    out_console().print(Group(head, table(None, ["operator", "state", "kind", "action", "why"], rows)))


def _to_ours(
    checkpoint: CompletedCheckpoint | FlinkSavepoint,
    target: str,
    written_to: tuple[str, dict[str, Any]],
    operators: list[str] | None,
    uids: list[str],
    dry_run: bool,
    as_json: bool,
) -> None:
    """``--to flinkstate``: the Flink savepoint written as ours into ``written_to`` (``target``
    and its options, or memory for a dry run), with a line per operator."""
    where, options = written_to
    if not isinstance(checkpoint, FlinkSavepoint):
        raise CheckpointError(
            "--to flinkstate converts a Flink savepoint; this is a flinkstate checkpoint already",
            code="UNSUPPORTED_FORMAT",
        )
    try:
        ours = import_savepoint(checkpoint, where, options, uids, operators)
        written: list[dict[str, Any]] = [
            {"uid": op.uid, "parallelism": op.parallelism, "max_parallelism": op.max_parallelism,
             "states": sorted({*(m.name for m in op.keyed_states), *(i.name for i in op.operator_states)}),
             "bytes": sum(f.size for st in op.subtasks for f in st.files())}
            for op in ours.manifest.operators
        ]  # fmt: skip
    finally:
        if dry_run:
            Storage(where, options).delete("")
    source_id = checkpoint.meta.checkpoint_id
    doc = {"source_checkpoint_id": source_id, "target": target, "to": "flinkstate", "dry_run": dry_run,
           "operators": written}  # fmt: skip
    if as_json:
        typer.echo(to_json(doc))
        return
    rows = [
        [o["uid"], o["parallelism"], o["max_parallelism"], ", ".join(o["states"]), human_bytes(o["bytes"])]
        for o in written
    ]
    verb = "would write" if dry_run else "wrote"
    head = Text(f"{verb} savepoint {target} from Flink checkpoint {source_id}", style="green")
    columns = ["operator", "parallelism", "max parallelism", "states", "bytes"]
    out_console().print(Group(head, table(None, columns, rows, right=("bytes",))))
