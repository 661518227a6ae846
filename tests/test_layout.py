"""docs/layout.md against the tree: each layer's bullet names every subpackage of that layer
(``name/``) and every module directly in its folder, and names no folder the tree lacks, so
the map a newcomer reads cannot drift from the house."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ROOT / "docs" / "layout.md"
LAYERS = ("state", "checkpoint", "connector")
"""The layers whose bullets describe their modules (``cli/`` is described as one command)."""


def _bullet(layer: str) -> str:
    """The text of the layout's bullet for ``layer`` (from ``- `layer/``` to the next bullet)."""
    text = LAYOUT.read_text()
    found = re.search(rf"^- `{layer}/`(.*?)(?=^- `|\Z)", text, re.S | re.M)
    assert found, f"docs/layout.md has no bullet for {layer}/"
    return found.group(1)


def _packages(layer: str) -> set[str]:
    """The names of the subpackages (folders with ``__init__.py``) under ``layer``."""
    return {p.parent.name for p in (ROOT / layer).rglob("__init__.py") if p.parent != ROOT / layer}


@pytest.mark.parametrize("layer", LAYERS)
def test_the_layout_names_every_subpackage_and_no_other_folder(layer: str) -> None:
    named = set(re.findall(r"`([A-Za-z_]\w*)/`", _bullet(layer)))
    on_disk = _packages(layer)
    assert on_disk - named == set(), f"{layer}/: subpackages docs/layout.md does not name"
    folders = {p.name for p in (ROOT / layer).rglob("*") if p.is_dir() and p.name != "__pycache__"}
    assert named - folders == set(), f"{layer}/: folders docs/layout.md names that are not there"


@pytest.mark.parametrize("layer", LAYERS)
def test_the_layout_names_every_module_of_the_layers_folder(layer: str) -> None:
    bullet = _bullet(layer)
    modules = {p.stem for p in (ROOT / layer).glob("*.py") if p.stem != "__init__"}
    missing = {m for m in modules if f"`{m}`" not in bullet}
    assert missing == set(), f"{layer}/: modules docs/layout.md does not name"


@pytest.mark.parametrize("layer", LAYERS)
def test_the_tests_of_a_layer_mirror_its_packages(layer: str) -> None:
    """Every folder under ``tests/<layer>/`` that holds tests is a package of ``<layer>/`` at the
    same path (``tests/state/heap/`` tests ``state/heap/``, ``tests/checkpoint/flink/writer/``
    ``checkpoint/flink/writer/``), so a test is found where its code is."""
    tests = ROOT / "tests" / layer
    folders = {p.parent.relative_to(tests) for p in tests.rglob("test_*.py")} - {Path(".")}
    assert folders, f"tests/{layer}/ has no subfolder of tests"
    unmirrored = sorted(str(f) for f in folders if not (ROOT / layer / f / "__init__.py").is_file())
    assert unmirrored == [], f"tests/{layer}/: folders that name no package of {layer}/"


def test_the_layout_names_the_contract_suites_and_support_modules() -> None:
    """The ``tests/`` bullet names each contract suite (``tests/contracts/``) and each module of
    ``tests/support/``, the places a newcomer looks for what runs on every implementation."""
    found = re.search(r"^- `tests/`(.*?)(?=^- `|\Z)", LAYOUT.read_text(), re.S | re.M)
    assert found, "docs/layout.md has no bullet for tests/"
    bullet = found.group(1)
    tests = ROOT / "tests"
    modules = {p.stem for p in (tests / "contracts").glob("test_*.py")}
    modules |= {p.stem for p in (tests / "support").glob("*.py") if p.stem != "__init__"}
    assert len(modules) > 5
    missing = {m for m in modules if f"`{m}`" not in bullet}
    assert missing == set(), "tests/contracts/ and tests/support/ modules docs/layout.md does not name"
