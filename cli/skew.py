"""``flinkstate skew``: how evenly a keyed state spreads over key groups and subtasks.

The picture an operator wants before rescaling: live entries per key group (what a restore
holds: an incremental checkpoint's delta and delete rows resolved, as a restore merges them)
and stored bytes (the data files' footers: every file holding the key group, increments
included), per subtask at the current or a proposed parallelism, the hottest key groups, bars
in the terminal and a PNG on request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.text import Text

from flinkstate.checkpoint import Load, key_group_loads, subtask_loads
from flinkstate.state import InvalidArgumentError, KeyGroupRange

from .common import (
    AllowPickle,
    CheckpointId,
    CheckpointPath,
    JsonFlag,
    OperatorUid,
    StorageOptions,
    err_console,
    guarded,
    load,
    out_console,
    pickle_hint,
    storage_options,
)
from .render import bar, human_bytes, sparkline, table, to_json

EXAMPLE = (
    "Example: flinkstate skew /tmp/my-job/checkpoints counter --parallelism 8 --png skew.png ; "
    "flinkstate skew s3://bucket/job/checkpoints counter count --json"
)
SPARK_WIDTH = 64
"""Key groups per line of the terminal's key-group chart."""


def _ratio(values: list[int]) -> float:
    """The largest value over the mean (1.0: perfectly even; 0 when there is nothing)."""
    mean = sum(values) / len(values) if values else 0
    return max(values) / mean if mean else 0.0


def _subtasks_json(loads: list[tuple[KeyGroupRange, Load]]) -> list[dict[str, Any]]:
    return [
        {"subtask": i, "key_groups": [r.start, r.end], "entries": load.entries, "bytes": load.bytes}
        for i, (r, load) in enumerate(loads)
    ]


@guarded("storage_option")
def skew(
    ctx: typer.Context,
    path: CheckpointPath,
    operator: OperatorUid,
    state: Annotated[
        str | None, typer.Argument(help="One keyed state (default: all of the operator's).")
    ] = None,
    parallelism: Annotated[
        int | None,
        typer.Option("--parallelism", "-p", min=1, help="A proposed parallelism (default: the current one)."),
    ] = None,
    png: Annotated[
        Path | None, typer.Option("--png", help="Also draw the picture into this PNG file.")
    ] = None,
    top: Annotated[
        int, typer.Option("--top", min=0, help="How many of the hottest key groups to name.")
    ] = 10,
    checkpoint_id: CheckpointId = None,
    as_json: JsonFlag = False,
    allow_pickle: AllowPickle = False,
    storage_option: StorageOptions = None,
) -> None:
    """Live entries and stored bytes per key group and per subtask, at the current or a
    proposed parallelism.

    ENTRIES are what a restore holds (an incremental checkpoint's updates and deletes resolved:
    the state's files are read); BYTES are the stored (compressed) bytes of the files.
    """
    checkpoint = load(path, storage_options(storage_option), checkpoint_id, allow_pickle)
    op = checkpoint.operator(operator)
    if not op.keyed_states:
        raise InvalidArgumentError(
            f"operator {operator!r} has no keyed state: nothing is spread by key group", code="NO_KEYED_STATE"
        )
    states = [s.name for s in op.keyed_states] if state is None else [state]
    with pickle_hint():
        per_group = key_group_loads(checkpoint, operator, states)
    p = op.parallelism if parallelism is None else parallelism
    subtasks = subtask_loads(per_group, op.max_parallelism, p)
    current = subtask_loads(per_group, op.max_parallelism, op.parallelism)
    owner = [i for i, (r, _) in enumerate(subtasks) for _ in r]
    groups = [per_group[kg] for kg in range(op.max_parallelism)]
    total = sum(groups, Load())
    hottest = sorted(range(len(groups)), key=lambda kg: (-groups[kg].bytes, -groups[kg].entries, kg))[:top]
    hottest = [kg for kg in hottest if groups[kg].entries or groups[kg].bytes]
    doc: dict[str, Any] = {
        "checkpoint_id": checkpoint.checkpoint_id,
        "operator": operator,
        "states": states,
        "max_parallelism": op.max_parallelism,
        "current_parallelism": op.parallelism,
        "parallelism": p,
        "entries": total.entries,
        "bytes": total.bytes,
        "imbalance": {
            "bytes": _ratio([load.bytes for _, load in subtasks]),
            "entries": _ratio([load.entries for _, load in subtasks]),
            "current_bytes": _ratio([load.bytes for _, load in current]),
            "current_entries": _ratio([load.entries for _, load in current]),
        },
        "subtasks": _subtasks_json(subtasks),
        "key_groups": [
            {"key_group": kg, "subtask": owner[kg], "entries": g.entries, "bytes": g.bytes}
            for kg, g in enumerate(groups)
        ],
        "hottest": [
            {"key_group": kg, "subtask": owner[kg], "entries": groups[kg].entries, "bytes": groups[kg].bytes}
            for kg in hottest
        ],
    }
    title = f"{operator} / {', '.join(states)}: checkpoint {checkpoint.checkpoint_id}"
    if png is not None:
        from .plot import write_png

        write_png(png, f"{title}, parallelism {p} of max {op.max_parallelism}", groups, subtasks, owner)
    if as_json:
        typer.echo(to_json(doc))
    else:
        out_console().print(_render(doc, groups, title))
    if png is not None:
        err_console().print(f"wrote {png}")


def _render(doc: dict[str, Any], groups: list[Load], title: str) -> Group:
    p, total_bytes = doc["parallelism"], doc["bytes"] or 1
    heaviest = max((s["bytes"] for s in doc["subtasks"]), default=0)
    mean = total_bytes / p
    subtasks = table(
        f"per subtask at parallelism {p}"
        + (" (current)" if p == doc["current_parallelism"] else f" (current: {doc['current_parallelism']})"),
        ["subtask", "key groups", "entries", "stored bytes", "share", "vs mean", ""],
        [
            [
                s["subtask"],
                f"{s['key_groups'][0]}-{s['key_groups'][1]}",
                s["entries"],
                human_bytes(s["bytes"]),
                f"{s['bytes'] / total_bytes:.1%}",
                f"x{s['bytes'] / mean:.2f}" if mean else "-",
                Text(bar(s["bytes"], heaviest), style="cyan"),
            ]
            for s in doc["subtasks"]
        ],
        right=("subtask", "entries", "stored bytes", "share", "vs mean"),
    )
    hot = table(
        f"hottest key groups (of {len(groups)})",
        ["key group", "subtask", "entries", "stored bytes", "share"],
        [
            [
                h["key_group"],
                h["subtask"],
                h["entries"],
                human_bytes(h["bytes"]),
                f"{h['bytes'] / total_bytes:.1%}",
            ]
            for h in doc["hottest"]
        ],
        right=("key group", "subtask", "entries", "stored bytes", "share"),
    )
    chart = [Text("stored bytes per key group", style="bold")]
    for start in range(0, len(groups), SPARK_WIDTH):
        chunk = [g.bytes for g in groups[start : start + SPARK_WIDTH]]
        top = max((g.bytes for g in groups), default=0)
        line = sparkline([*chunk, top])[:-1]  # scaled to the largest key group overall
        end = start + len(chunk) - 1
        chart.append(Text.assemble((f"{start:>5}-{end:<5} ", "dim"), (line, "magenta")))
    imbalance = doc["imbalance"]
    empty = sum(1 for g in groups if not g.entries)
    text = (
        f"{doc['entries']} entries, {human_bytes(doc['bytes'])} stored in {len(groups)} key groups "
        f"({empty} empty). The largest subtask holds x{imbalance['bytes']:.2f} the mean stored bytes "
        f"(x{imbalance['entries']:.2f} entries) "
        f"at parallelism {p}"
    )
    if p != doc["current_parallelism"]:
        text += f"; x{imbalance['current_bytes']:.2f} at the current {doc['current_parallelism']}"
    summary = Text(text + ".")
    return Group(Text(title, style="bold"), summary, subtasks, *chart, hot)
