"""Every error code the library raises is in the error table (docs/errors.md), and every code
listed there is raised somewhere; every error class lives in its package's ``errors`` module."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ERROR_TABLE = ROOT / "docs" / "errors.md"
PACKAGES = ("state", "checkpoint", "connector", "cli")
_CODE = re.compile(r"(?:\bdefault_code\s*=\s*|\bcode\s*=\s*)\"([A-Z][A-Z0-9_]+)\"")
_ROW = re.compile(r"^\|\s*`([A-Z][A-Z0-9_]+)`\s*\|")
_ERROR_CLASS = re.compile(r"^class (\w+(?:Error|Exception))\(", re.M)


def _sources() -> list[Path]:
    return [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]


def raised_codes() -> dict[str, list[str]]:
    """Code -> the files that raise it (a ``code=`` argument or a class's ``default_code``)."""
    found: dict[str, list[str]] = {}
    for path in _sources():
        for code in _CODE.findall(path.read_text(encoding="utf-8")):
            found.setdefault(code, []).append(str(path.relative_to(ROOT)))
    return found


def listed_codes() -> list[str]:
    """The codes of the error table (the rows ``| `CODE` | ...`` of docs/errors.md)."""
    text = ERROR_TABLE.read_text(encoding="utf-8")
    return [m.group(1) for line in text.splitlines() if (m := _ROW.match(line))]


def test_every_raised_code_is_listed() -> None:
    missing = {c: files for c, files in raised_codes().items() if c not in listed_codes()}
    assert not missing, f"codes raised but not in the error table (docs/errors.md): {missing}"


def test_every_listed_code_is_raised() -> None:
    listed = listed_codes()
    assert len(listed) == len(set(listed)), "a code is listed twice"
    unraised = sorted(set(listed) - set(raised_codes()))
    assert not unraised, f"codes in the error table (docs/errors.md) that nothing raises: {unraised}"


def test_error_classes_live_in_errors_modules() -> None:
    elsewhere = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in _sources()
        if path.name != "errors.py"
        for name in _ERROR_CLASS.findall(path.read_text(encoding="utf-8"))
    }
    assert not elsewhere, f"error classes outside an errors module: {sorted(elsewhere)}"


def test_the_scan_sees_codes() -> None:
    """The scans above are not vacuous: known codes are found on both sides."""
    for code in ("CHECKPOINT_CORRUPT", "INVALID_OPTION", "NO_CURRENT_KEY"):
        assert code in raised_codes() and code in listed_codes()
