"""The skew picture as a PNG (matplotlib's Agg canvas, no display and no pyplot state)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from flinkstate.checkpoint import Load
from flinkstate.state import KeyGroupRange
from flinkstate.state.extras import require

from .render import human_bytes


def write_png(
    target: Path,
    title: str,
    key_groups: Sequence[Load],
    subtasks: Sequence[tuple[KeyGroupRange, Load]],
    owner: Sequence[int],
) -> None:
    """Stored bytes per key group (coloured by owning subtask) above stored bytes and live
    entries per subtask."""
    require("matplotlib", "skew --png")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(12, 7), layout="constrained")
    FigureCanvasAgg(figure)
    figure.suptitle(title)
    top, bottom = figure.subplots(2, 1)
    palette = [f"C{i % 10}" for i in range(len(subtasks))]
    top.bar(
        range(len(key_groups)), [g.bytes for g in key_groups], width=1.0, color=[palette[s] for s in owner]
    )
    top.set_xlabel("key group (colour: owning subtask)")
    top.set_ylabel("stored bytes")
    top.set_xlim(-0.5, len(key_groups) - 0.5)
    top.set_title("stored bytes per key group")

    index = list(range(len(subtasks)))
    sizes = [load.bytes for _, load in subtasks]
    bottom.bar(index, sizes, color=palette)
    mean = sum(sizes) / len(sizes) if sizes else 0
    bottom.axhline(mean, color="black", linestyle="--", linewidth=1, label=f"mean {human_bytes(mean)}")
    bottom.set_xlabel("subtask")
    bottom.set_ylabel("stored bytes")
    bottom.set_title(f"stored bytes and entries per subtask at parallelism {len(subtasks)}")
    if len(index) <= 32:
        bottom.set_xticks(index, [f"{i}\n{r.start}-{r.end}" for i, (r, _) in enumerate(subtasks)])
    entries = bottom.twinx()
    entries.plot(index, [load.entries for _, load in subtasks], "o", color="black", label="entries")
    entries.set_ylabel("entries")
    entries.set_ylim(bottom=0)
    handles = bottom.get_legend_handles_labels()
    more = entries.get_legend_handles_labels()
    bottom.legend(handles[0] + more[0], handles[1] + more[1], loc="upper right")
    figure.savefig(target, dpi=100, format="png")
