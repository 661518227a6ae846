"""flinkstate has PyFlink 2.3's state and process-function API: every class and method of
``tests/data/pyflink_api.json`` (generated from PyFlink's sources by
``tests/data/gen_pyflink_api.py``) is in ``flinkstate.state`` with a signature that
accepts every call PyFlink's accepts, or is in ``tests/data/pyflink_omitted.json`` with
the reason we leave it out."""

from __future__ import annotations

import enum
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import flinkstate.state

DATA = Path(__file__).parent.parent / "data"
API = json.loads((DATA / "pyflink_api.json").read_text())["classes"]
OMITTED: dict[str, str] = json.loads((DATA / "pyflink_omitted.json").read_text())

KINDS = {
    "positional": inspect.Parameter.POSITIONAL_OR_KEYWORD,
    "keyword": inspect.Parameter.KEYWORD_ONLY,
    "var_positional": inspect.Parameter.VAR_POSITIONAL,
    "var_keyword": inspect.Parameter.VAR_KEYWORD,
}


def incompatibility(theirs: list[dict[str, Any]], ours: Callable[..., Any], bound: bool) -> str | None:
    """Why a call PyFlink's signature accepts would fail on ``ours`` (None: none would)."""
    params = list(inspect.signature(ours).parameters.values())
    if bound:  # an unbound method or __init__: drop self
        params = params[1:]
    kinds = {p.kind for p in params}
    by_name = {p.name: p for p in params}
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for i, t in enumerate(x for x in theirs if x["kind"] == "positional"):
        if i >= len(positional):
            if inspect.Parameter.VAR_POSITIONAL not in kinds:
                return f"no parameter {t['name']!r} at position {i}"
            continue
        mine = positional[i]
        if mine.name != t["name"] and inspect.Parameter.VAR_KEYWORD not in kinds:
            return f"parameter {i} is {mine.name!r}, PyFlink's {t['name']!r}"
        if t["default"] and mine.default is inspect.Parameter.empty:
            return f"parameter {mine.name!r} has no default, PyFlink's {t['name']!r} has"
    for t in theirs:
        if t["kind"] == "keyword" and t["name"] not in by_name and inspect.Parameter.VAR_KEYWORD not in kinds:
            return f"no keyword parameter {t['name']!r}"
        if t["kind"] in ("var_positional", "var_keyword") and KINDS[t["kind"]] not in kinds:
            return f"no *{t['name']}"
    named = {t["name"] for t in theirs}
    required = [
        p.name
        for p in params[len([t for t in theirs if t["kind"] == "positional"]) :]
        if p.default is inspect.Parameter.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and p.name not in named
    ]
    return f"extra required parameter(s) {required}" if required else None


def omitted(key: str) -> bool:
    """Whether ``key`` or a class it belongs to is a documented omission."""
    parts = key.split(".")
    return any(".".join(parts[:i]) in OMITTED for i in range(1, len(parts) + 1))


def resolve(name: str) -> Any:
    obj: Any = flinkstate.state
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


CASES = [(c["name"], None) for c in API] + [(c["name"], m) for c in API for m in c["methods"]]
CASES += [(f"{c['name']}.{m}", "member") for c in API for m in c["members"]]


@pytest.mark.parametrize(("cls", "method"), CASES, ids=[f"{c}.{m}" if m else c for c, m in CASES])
def test_flinkstate_has_pyflinks_api(cls: str, method: str | None) -> None:
    key = cls if method in (None, "member") else f"{cls}.{method}"
    if omitted(key):
        return
    assert hasattr(flinkstate.state, cls.split(".")[0]), f"flinkstate.state has no {cls}"
    obj = resolve(cls)
    if method in (None, "member"):
        assert isinstance(obj, type | enum.Enum), f"{cls} is not a class or enum member"
        return
    spec = next(c for c in API if c["name"] == cls)["methods"][method]
    assert hasattr(obj, method), f"flinkstate.state.{cls} has no {method}"
    ours = getattr(obj, method)
    bound = not spec["static"] and not isinstance(inspect.getattr_static(obj, method), classmethod)
    problem = incompatibility(spec["params"], ours, bound)
    assert problem is None, f"flinkstate.state.{cls}.{method}: {problem}"


def test_every_omission_names_pyflink_api_a_reason_and_is_still_needed() -> None:
    methods = {f"{c['name']}.{m}": (c["name"], m) for c in API for m in c["methods"]}
    known = {c["name"] for c in API} | set(methods) | {f"{c['name']}.{m}" for c in API for m in c["members"]}
    assert set(OMITTED) <= known, f"omissions of no PyFlink API: {sorted(set(OMITTED) - known)}"
    assert all(isinstance(r, str) and len(r) > 20 for r in OMITTED.values())
    for key in OMITTED:  # an omission must not be something we have after all
        try:
            ours = resolve(key)
        except AttributeError:
            continue
        assert key in methods, f"{key} is omitted but flinkstate.state has it"
        cls, method = methods[key]
        spec = next(c for c in API if c["name"] == cls)["methods"][method]
        assert incompatibility(spec["params"], ours, not spec["static"]) is not None, (
            f"{key} is omitted but flinkstate.state has it with a compatible signature"
        )


def test_the_check_catches_an_incompatible_signature() -> None:
    theirs = [{"name": "key", "kind": "positional", "default": False}]
    assert incompatibility(theirs, lambda self, key: None, True) is None
    assert incompatibility(theirs, lambda self, k: None, True) == "parameter 0 is 'k', PyFlink's 'key'"
    assert "no parameter 'key'" in str(incompatibility(theirs, lambda self: None, True))
    assert "extra required" in str(incompatibility(theirs, lambda self, key, other: None, True))
    with_default = [{"name": "n", "kind": "positional", "default": True}]
    assert "no default" in str(incompatibility(with_default, lambda self, n: None, True))
