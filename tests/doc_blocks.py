"""The ```python blocks of README.md and docs/, found and run page by page.

A page's blocks run in order in one namespace (as a notebook: a later block uses what an
earlier one made), named ``__main__`` (so Spark ships the classes they define by value),
with the working directory a fresh temporary one and every ``"/tmp/`` path in them pointed
into it, so pages never share files (nor with other runs on the machine). A page whose
blocks name ``spark`` runs with the tests' SparkSession as ``spark`` (tests/connector).
A ```bash block whose every line is a ``flinkstate ...`` command runs too, each command
through the command's app in order with the Python blocks (exit status 0 wanted); other
shell blocks (``make ...``) are not run.

A block that cannot run here is marked on the line before its fence with
``<!-- docs-test: skip (the reason) -->``; :data:`MAX_SKIPPED` keeps that list short.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MAX_SKIPPED = 3
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_SKIP = re.compile(r"<!-- docs-test: skip \(([^)]+)\) -->\s*$")
_SPARK = re.compile(r"\bspark\.")


@dataclass(frozen=True)
class Block:
    """One ```python block: where it is, its code, and why it is skipped (``None``: it runs)."""

    page: Path
    line: int  # of the fence
    code: str
    skip: str | None
    commands: bool = False  # a block of ``flinkstate`` commands, not Python

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _is_commands(lang: str, code: str) -> bool:
    lines = [line for line in code.splitlines() if line.strip()]
    return lang == "bash" and bool(lines) and all(line.startswith("flinkstate ") for line in lines)


def blocks(page: Path) -> list[Block]:
    """The page's ```python blocks and blocks of ``flinkstate`` commands, in order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in _FENCE.finditer(text):
        lang, code = m.group(1), m.group(2)
        commands = _is_commands(lang, code)
        if lang != "python" and not commands:
            continue
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = _SKIP.search(before)
        line = text.count("\n", 0, m.start()) + 1
        found.append(Block(page, line, code, skip.group(1) if skip else None, commands))
    return found


def _run_commands(block: Block, workdir: Path) -> None:
    from typer.testing import CliRunner

    from flinkstate.cli import app

    runner = CliRunner(env={"FLINKSTATE_DEBUG": ""})
    for offset, line in enumerate(block.code.splitlines(), start=1):
        args = [
            f"{workdir}/{a[5:]}" if a.startswith("/tmp/") else a for a in shlex.split(line, comments=True)
        ]
        if not args:
            continue
        result = runner.invoke(app, args[1:])
        where = f"{block.page}:{block.line + offset}"
        assert result.exit_code == 0, f"{where}: {line}\n{result.stdout}{result.stderr}"


def runnable(page: Path) -> list[Block]:
    """The page's blocks that run (not skipped)."""
    return [b for b in blocks(page) if b.skip is None]


def needs_spark(page: Path) -> bool:
    return any(_SPARK.search(b.code) for b in runnable(page))


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def run_page(page: Path, workdir: Path, spark: Any = None) -> int:
    """Run the page's blocks (not the skipped ones) in ``workdir``; return how many ran."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    if spark is not None:
        namespace["spark"] = spark
    ran = 0
    before = Path.cwd()
    os.chdir(workdir)
    try:
        for block in runnable(page):
            ran += 1
            if block.commands:
                _run_commands(block, workdir)
                continue
            code = block.code.replace('"/tmp/', f'"{workdir}/')
            # blank lines first, so a traceback gives the line of the page
            exec(compile("\n" * block.line + code, str(block.page), "exec"), namespace)
    finally:
        os.chdir(before)
    return ran
