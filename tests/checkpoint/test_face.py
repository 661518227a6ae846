"""``flinkstate.checkpoint`` exports what its users need and no helpers: every name on its
face is imported by an upper layer (``connector/``, ``cli/``), by the examples or in the docs,
or is a type in the signature of such a name (what a caller of it receives or passes), or an
error users catch."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import flinkstate.checkpoint as face

ROOT = Path(__file__).resolve().parents[2]
_DOC_IMPORT = re.compile(r"from flinkstate\.checkpoint import (\([^)]*\)|[^\n]+)")
_DOC_NAME = re.compile(r"`flinkstate\.checkpoint\.(\w+)`")


def _imported_by_upper_layers() -> set[str]:
    names: set[str] = set()
    for folder in ("connector", "cli", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == "flinkstate.checkpoint":
                    names.update(alias.name for alias in node.names)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        names.update(_DOC_NAME.findall(page.read_text(encoding="utf-8")))
        for group in _DOC_IMPORT.findall(page.read_text(encoding="utf-8")):
            names.update(n.split("#")[0].strip() for n in group.strip("()").replace("\n", " ").split(","))
    return names - {""}


def _signature_text(obj: Any) -> str:
    """The annotations a caller of ``obj`` sees: a function's, or a class's fields and the
    parameters and results of its public methods."""
    parts = [str(getattr(obj, "__annotations__", {}))]
    if inspect.isclass(obj):
        for name, member in vars(obj).items():
            if name.startswith("_") and name != "__init__":
                continue
            member = member.fget if isinstance(member, property) else member
            member = getattr(member, "__func__", member)
            parts.append(str(getattr(member, "__annotations__", {})))
    return " ".join(parts)


def test_every_name_on_the_face_has_a_user() -> None:
    errors = {
        n
        for n in face.__all__
        if inspect.isclass(getattr(face, n)) and issubclass(getattr(face, n), Exception)
    }
    reached = _imported_by_upper_layers() | errors
    while True:  # types named by the signatures of what is used, and by theirs in turn
        text = " ".join(_signature_text(getattr(face, n)) for n in reached if n in face.__all__)
        more = {n for n in face.__all__ if n not in reached and re.search(rf"\b{n}\b", text)}
        if not more:
            break
        reached |= more
    unused = sorted(set(face.__all__) - reached)
    assert not unused, f"flinkstate.checkpoint exports names nothing above it uses: {unused}"


def test_the_face_passes_no_file_internals() -> None:
    internals = {
        "key_mask",
        "store_file",
        "read_row_group",
        "write_row_groups",
        "open_whole",
        "merged_key_group",
    }
    assert not internals & set(face.__all__)
    assert set(face.__all__) <= set(dir(face))
