"""Turning state values and figures into JSON, CSV, table cells and lines.

Tables are rich tables on a terminal; off one (a file, a pipe into ``grep``) every record
is one line of tab-separated cells, never wrapped or cut (:func:`plain_lines`).

JSON follows the conventions keys are given in (``flinkstate.checkpoint.keys_of_type``): ROW values
are objects by field name, byte arrays are arrays of byte values, maps with text keys are
objects (others: arrays of ``[key, value]`` pairs), timestamps are ISO 8601 in UTC.
"""

from __future__ import annotations

import base64
import csv
import datetime
import decimal
import io
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from flinkstate.state.ttl import StateTtlConfig, StateVisibility, TtlTimeCharacteristic, UpdateType


def jsonable(value: Any) -> Any:
    """``value`` (as Arrow's ``to_pylist`` or the state engine gives it) as plain JSON data."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return list(bytes(value))
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc)
        return value.isoformat()
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, Mapping):
        items = [(jsonable(k), jsonable(v)) for k, v in value.items()]
        return _pairs(items)
    if isinstance(value, list) and value and all(isinstance(e, tuple) and len(e) == 2 for e in value):
        # an Arrow map: [(key, value), ...]
        return _pairs([(jsonable(k), jsonable(v)) for k, v in value])
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return base64.b64encode(repr(value).encode()).decode()  # unknown objects: never crash a listing


def _pairs(items: list[tuple[Any, Any]]) -> Any:
    if all(isinstance(k, str) for k, _ in items):
        return dict(items)
    return [[k, v] for k, v in items]


def cell(value: Any) -> Text:
    """A table cell: text as is, ``null`` dimmed, everything else as compact JSON."""
    if value is None:
        return Text("null", style="dim")
    if isinstance(value, str):
        return Text(value)
    return Text(json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":")))


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


def csv_lines(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """CSV lines, the header first; nested values as compact JSON, nulls empty."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")

    def line(values: Sequence[str]) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(values)
        return buffer.getvalue()

    yield line(columns)
    for row in rows:
        out = []
        for name in columns:
            value = jsonable(row.get(name))
            if value is None:
                out.append("")
            elif isinstance(value, str):
                out.append(value)
            else:
                out.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        yield line(out)


def human_bytes(n: int | float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def utc_time(epoch_ms: int) -> str:
    """Epoch milliseconds as ``2026-11-22 21:30:05`` (UTC); ``-`` when unknown (0)."""
    if not epoch_ms:
        return "-"
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def iso_time(epoch_ms: int) -> str | None:
    if not epoch_ms:
        return None
    return datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.timezone.utc).isoformat()


@dataclass(frozen=True)
class Listing:
    """A table: rich on a terminal (``__rich__``), one line per row off one (:func:`plain_lines`).
    Columns named in ``right`` are right-aligned (numbers)."""

    title: str | None
    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    right: Sequence[str] = ()

    def __rich__(self) -> Table:
        out = Table(title=self.title, title_justify="left", header_style="bold")
        for name in self.columns:
            out.add_column(name, justify="right" if name in self.right else "left", overflow="fold")
        for row in self.rows:
            out.add_row(*(v if isinstance(v, Text) else cell(v) for v in row))
        return out


def table(
    title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]], right: Sequence[str] = ()
) -> Listing:
    """A table of ``rows`` (cells: :class:`Text` or values shown by :func:`cell`)."""
    return Listing(title, list(columns), [list(row) for row in rows], tuple(right))


_CONTROL = str.maketrans({"\t": "\\t", "\n": "\\n", "\r": "\\r"})


def plain_cell(value: Any) -> str:
    """A cell on one line, whole: tabs and line breaks inside it escaped (``\\t``, ``\\n``)."""
    text = value.plain if isinstance(value, Text) else cell(value).plain
    return text.translate(_CONTROL)


def plain_lines(part: Any) -> Iterator[str]:
    """What ``part`` (a :class:`Listing`, :class:`Text`, text or ``Group`` of them) prints off a
    terminal: a table's title, its header and one line per row, cells separated by tabs."""
    if isinstance(part, Group):
        for inner in part.renderables:
            yield from plain_lines(inner)
    elif isinstance(part, Listing):
        if part.title:
            yield part.title
        yield "\t".join(plain_cell(c) for c in part.columns)
        for row in part.rows:
            yield "\t".join(plain_cell(v) for v in row)
    elif isinstance(part, Text):
        yield from part.plain.split("\n")
    else:
        yield from str(part).split("\n")


def duration(ms: int) -> str:
    """``90061000`` -> ``1d1h1m1s``; ``1500`` -> ``1500ms``."""
    if ms % 1000:
        return f"{ms}ms"
    rest, parts = ms // 1000, []
    for unit, seconds in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= seconds:
            parts.append(f"{rest // seconds}{unit}")
            rest %= seconds
    return "".join(parts) or "0s"


def ttl_text(ttl: StateTtlConfig) -> str:
    """A TTL in a few words: ``1d``, ``1h read/write event-time expired-visible``."""
    words = [duration(ttl.ttl_ms)]
    if ttl.update_type is UpdateType.OnReadAndWrite:
        words.append("read/write")
    if ttl.time_characteristic is TtlTimeCharacteristic.EventTime:
        words.append("event-time")
    if ttl.state_visibility is StateVisibility.ReturnExpiredIfNotCleanedUp:
        words.append("expired-visible")
    return " ".join(words)


BLOCKS = " ▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float]) -> str:
    """One character per value, its height proportional to the value (max = full block)."""
    top = max(values, default=0)
    if top <= 0:
        return BLOCKS[0] * len(values)
    return "".join(BLOCKS[max(1 if v > 0 else 0, round(v / top * 8))] for v in values)


def bar(value: float, top: float, width: int = 16) -> str:
    """A horizontal bar of ``width`` cells at most, in eighths of a cell."""
    if top <= 0 or value <= 0:
        return ""
    eighths = max(1, round(value / top * width * 8))
    full, rest = divmod(eighths, 8)
    return "█" * full + ("▏▎▍▌▋▊▉"[rest - 1] if rest else "")
