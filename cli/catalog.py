"""``flinkstate list`` and ``flinkstate inspect``: what checkpoints there are and what they hold."""

from __future__ import annotations

import posixpath
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.text import Text

from flinkstate.checkpoint import (
    METADATA,
    CheckpointCorruptError,
    CheckpointNotFoundError,
    Manifest,
    OperatorEntry,
    Storage,
    completed_ids,
    load_version,
    metadata_table,
    state_entries,
    version_ids,
)

from .common import (
    AllowPickle,
    CheckpointId,
    CheckpointPath,
    JsonFlag,
    StorageOptions,
    guarded,
    load,
    out_console,
    pickle_hint,
    storage_options,
)
from .render import human_bytes, iso_time, table, to_json, ttl_text, utc_time

LIST_EXAMPLE = (
    "Example: flinkstate list /tmp/my-job/checkpoints ; "
    "flinkstate list s3://bucket/job/checkpoints -o key=... -o secret=... --json"
)
INSPECT_EXAMPLE = (
    "Example: flinkstate inspect /tmp/my-job/checkpoints --checkpoint-id 7 ; "
    "flinkstate inspect /tmp/savepoint-1 --json"
)


def checkpoint_type(kind: str, shares: bool) -> str:
    """``savepoint``; else ``incremental`` when the manifest says so or the checkpoint
    references files of earlier checkpoints (``shares``), ``full`` when it holds all it needs."""
    return "savepoint" if kind == "savepoint" else "incremental" if shares else "full"


def checkpoint_summary(manifest: Manifest, directory: str) -> dict[str, Any]:
    """What ``list`` shows of one checkpoint; ``directory``: its path under the listed root."""
    files = {posixpath.normpath(posixpath.join(directory, f.path)): f.size for f in manifest.files()}
    prefix = f"{directory}/" if directory else ""
    mine = {path for path in files if path.startswith(prefix) and not path.startswith("..")}
    own = sum(files[path] for path in mine)
    return {
        "checkpoint_id": manifest.checkpoint_id,
        "path": directory or ".",
        "kind": manifest.kind,
        "type": checkpoint_type(manifest.kind, shares=manifest.incremental or len(mine) < len(files)),
        "created_at": iso_time(manifest.created_at_ms),
        "created_at_ms": manifest.created_at_ms,
        "bytes": sum(files.values()),
        "own_bytes": own,
        "files": len(files),
        "operators": [op.uid for op in manifest.operators],
        "states": sum(len(op.keyed_states) + len(op.operator_states) for op in manifest.operators),
    }


@guarded("storage_option")
def list_checkpoints(
    ctx: typer.Context,
    root: Annotated[str, typer.Argument(help="A checkpoint root, or a savepoint / chk-<id> directory.")],
    storage_option: StorageOptions = None,
    as_json: JsonFlag = False,
) -> None:
    """The completed checkpoints under ROOT, newest first: id, time, type, size, operators.

    TYPE is full, incremental (it references files of earlier checkpoints) or savepoint.
    SIZE is every file the checkpoint references; OWN the part stored in its own directory
    (the rest is shared with earlier checkpoints).
    """
    storage = Storage(root, storage_options(storage_option))
    entries: list[dict[str, Any]] = []
    pending: list[int] = []
    if storage.exists(METADATA):
        entries.append(checkpoint_summary(Manifest.from_bytes(storage.read_bytes(METADATA)), ""))
    else:
        done = completed_ids(storage)
        pending = [i for i in version_ids(storage) if i not in done]
        for i in reversed(done):
            try:
                entries.append(checkpoint_summary(load_version(storage, i), f"chk-{i}"))
            except CheckpointCorruptError as exc:
                entries.append({"checkpoint_id": i, "path": f"chk-{i}", "error": str(exc)})
        if not entries:
            raise CheckpointNotFoundError(f"no completed checkpoint under {storage!r}")
    if as_json:
        typer.echo(to_json({"root": storage.safe_url, "checkpoints": entries, "without_manifest": pending}))
        return
    rows = []
    for e in entries:
        if "error" in e:
            rows.append(
                [e["checkpoint_id"], "-", Text("CORRUPT", style="bold red"), "-", "-", Text(e["error"])]
            )
            continue
        rows.append(
            [
                e["checkpoint_id"],
                utc_time(e["created_at_ms"]),
                e["type"],
                human_bytes(e["bytes"]),
                human_bytes(e["own_bytes"]),
                ", ".join(e["operators"]),
            ]
        )
    columns = ["id", "created (UTC)", "type", "size", "own", "operators"]
    title = f"{len(entries)} completed under {storage.safe_url}"
    out = table(title, columns, rows, right=("id", "size", "own"))
    notes = [Text(f"chk-{i}: no manifest (in progress or abandoned)", style="yellow") for i in pending]
    out_console().print(Group(out, *notes))


def _subtask_entries(op: OperatorEntry, index: int, keyed: dict[str, dict[int, int]]) -> int:
    """Live keyed entries in subtask ``index``'s key groups, plus its operator state elements."""
    st = op.subtasks[index]
    mine = range(st.key_group_range[0], st.key_group_range[1] + 1) if st.key_group_range else range(0)
    live = sum(n for groups in keyed.values() for kg, n in groups.items() if kg in mine)
    return live + sum(f.rows for g in (st.operator, st.broadcast) for fs in g.values() for f in fs)


def _operator_json(
    op: OperatorEntry, states: list[dict[str, Any]], keyed: dict[str, dict[int, int]]
) -> dict[str, Any]:
    """``keyed``: the live entries of each keyed state of ``op`` per key group."""
    return {
        "uid": op.uid,
        "parallelism": op.parallelism,
        "max_parallelism": op.max_parallelism,
        "key_type": None if op.key_type is None else str(op.key_type),
        "states": [s for s in states if s["operator"] == op.uid],
        "subtasks": [
            {
                "index": st.index,
                "key_group_range": None if st.key_group_range is None else list(st.key_group_range),
                "files": len(st.files()),
                "entries": _subtask_entries(op, n, keyed),
                "stored_rows": sum(f.rows for f in st.files()),
                "bytes": sum(f.size for f in st.files()),
            }
            for n, st in enumerate(op.subtasks)
        ],
    }


@guarded("storage_option")
def inspect(
    ctx: typer.Context,
    path: CheckpointPath,
    checkpoint_id: CheckpointId = None,
    storage_option: StorageOptions = None,
    as_json: JsonFlag = False,
    allow_pickle: AllowPickle = False,
) -> None:
    """Operators and states of a checkpoint: kind, key/namespace/value types, TTL, entries,
    stored rows and bytes, parallelism and max parallelism.

    ENTRIES are what a restore holds (one per key and namespace, one per map entry; operator
    state: its elements): an incremental checkpoint's updates and deletes are resolved, so
    the keyed states' files are read. STORED ROWS and BYTES are what the files hold,
    increments included.
    """
    checkpoint = load(path, storage_options(storage_option), checkpoint_id, allow_pickle)
    manifest = checkpoint.manifest
    with pickle_hint():
        keyed = {
            op.uid: {m.name: state_entries(checkpoint, op.uid, m.name) for m in op.keyed_states}
            for op in manifest.operators
        }
    states = []
    for s in metadata_table(manifest, manifest.checkpoint_id).to_pylist():
        s.pop("checkpoint_id", None)
        stored = s.pop("rows")
        live = keyed[s["operator"]].get(s["state"])
        # operator state is written whole every time: its stored elements are its entries
        entries = stored if live is None else sum(live.values())
        states.append({**s, "entries": entries, "stored_rows": stored})
    doc: dict[str, Any] = {
        "checkpoint_id": manifest.checkpoint_id,
        "kind": manifest.kind,
        "type": checkpoint_type(
            manifest.kind, manifest.incremental or any(f.path.startswith("..") for f in manifest.files())
        ),
        "path": checkpoint.directory.safe_url,
        "created_at": iso_time(manifest.created_at_ms),
        "properties": dict(manifest.properties),
        "operators": [_operator_json(op, states, keyed[op.uid]) for op in manifest.operators],
    }
    if as_json:
        typer.echo(to_json(doc))
        return
    head = Text.assemble(
        (f"{manifest.kind} {manifest.checkpoint_id} ({doc['type']})", "bold"),
        f"  {checkpoint.directory.safe_url}  created {utc_time(manifest.created_at_ms)} UTC",
        *(f"\n  {k} = {v}" for k, v in sorted(manifest.properties.items())),
    )
    operators = table(
        "operators",
        [
            "operator",
            "parallelism",
            "max parallelism",
            "key type",
            "states",
            "files",
            "entries",
            "stored bytes",
        ],
        [
            [
                op["uid"],
                op["parallelism"],
                op["max_parallelism"],
                op["key_type"] or "-",
                len(op["states"]),
                sum(st["files"] for st in op["subtasks"]),
                sum(st["entries"] for st in op["subtasks"]),
                human_bytes(sum(st["bytes"] for st in op["subtasks"])),
            ]
            for op in doc["operators"]
        ],
        right=("parallelism", "max parallelism", "states", "files", "entries", "stored bytes"),
    )
    metas = {(op.uid, m.name): m for op in manifest.operators for m in op.keyed_states}
    columns = [
        "operator", "state", "kind", "key", "namespace", "user key", "value", "TTL",
        "entries", "stored rows", "stored bytes",
    ]  # fmt: skip
    state_rows = []
    for s in states:
        meta = metas.get((s["operator"], s["state"]))
        ttl = "-" if meta is None or meta.ttl is None else ttl_text(meta.ttl)
        state_rows.append(
            [
                s["operator"],
                s["state"],
                s["kind"],
                s["key_type"] or "-",
                s["namespace_type"] or "-",
                s["user_key_type"] or "-",
                s["value_type"],
                ttl,
                s["entries"],
                s["stored_rows"],
                human_bytes(s["bytes"]),
            ]
        )
    used = [i for i, _ in enumerate(columns) if any(row[i] != "-" for row in state_rows)]
    state_table = table(
        "states",
        [columns[i] for i in used],
        [[row[i] for i in used] for row in state_rows],
        right=("entries", "stored rows", "stored bytes"),
    )
    out_console().print(Group(head, operators, state_table))
