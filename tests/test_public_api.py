"""The documented names import from where README and docs/ import them, and carry real types."""

from __future__ import annotations

import importlib
import importlib.util
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_IMPORT = re.compile(r"^\s*from (flinkstate[\w.]*) import (\([^)]*\)|[^\n]+)", re.MULTILINE)
_DOTTED = re.compile(r"`(flinkstate(?:\.\w+)+)")


def _documented_imports() -> list[tuple[str, str]]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    pairs = []
    for module, names in _IMPORT.findall(text):
        for name in names.strip("()").replace("\n", " ").split(","):
            name = name.split("#")[0].strip()
            if name:
                pairs.append((module, name.split(" as ")[0].strip()))
    for dotted in _DOTTED.findall(text):  # names in the prose: `flinkstate.state.ttl.ManualTimeProvider`
        module, _, name = dotted.rpartition(".")
        if module.count("."):
            pairs.append((module, name))
    return pairs


def test_the_docs_have_imports_to_check() -> None:
    assert len(_documented_imports()) >= 20


@pytest.mark.parametrize(("module", "name"), sorted(set(_documented_imports())))
def test_every_documented_import_works(module: str, name: str) -> None:
    try:
        found = hasattr(importlib.import_module(module), name)
        found = found or importlib.util.find_spec(f"{module}.{name}") is not None  # a subpackage
    except ModuleNotFoundError:  # `flinkstate.checkpoint.writing.rewrite`: a module named in full
        found = importlib.util.find_spec(f"{module}.{name}") is not None
    assert found, f"the docs name {name} in {module}"


def test_type_checkers_see_the_state_interfaces(tmp_path: Path) -> None:
    from mypy import api

    snippet = tmp_path / "user_code.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from flinkstate.state import (
                HeapKeyedStateBackend, ListStateDescriptor, MapStateDescriptor, Types, ValueStateDescriptor,
            )
            backend = HeapKeyedStateBackend()
            count = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
            reveal_type(count)
            reveal_type(backend.get_list_state(ListStateDescriptor("l", Types.LONG())))
            reveal_type(backend.get_partitioned_state(1, MapStateDescriptor("m", Types.LONG(), Types.LONG())))
            count.add(1)
            """
        )
    )
    out, _, status = api.run([str(snippet), "--no-incremental", "--follow-imports=silent"])
    assert status == 1, out
    assert 'Revealed type is "flinkstate.state.interfaces.ValueState[Any]"' in out
    assert 'Revealed type is "flinkstate.state.interfaces.ListState[Any]"' in out
    assert 'Revealed type is "flinkstate.state.interfaces.MapState[Any, Any]"' in out
    assert '"ValueState[Any]" has no attribute "add"' in out
