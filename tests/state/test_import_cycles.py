"""The modules of ``state/`` import one another without a cycle: the lowest API (errors,
types, descriptors) names no runtime, and type-only imports count too."""

from __future__ import annotations

import grimp

STATE = "flinkstate.state"


def _imports() -> dict[str, set[str]]:
    graph = grimp.build_graph("flinkstate", cache_dir=None)
    modules = {m for m in graph.modules if m == STATE or m.startswith(STATE + ".")}
    edges: dict[str, set[str]] = {}
    for module in modules:
        edges[module] = set()
        for imported in graph.find_modules_directly_imported_by(module) & modules:
            lines = [d["line_contents"] for d in graph.get_import_details(importer=module, imported=imported)]
            if module.startswith(imported + ".") and all(" import _" in line for line in lines):
                continue  # `from . import _hashing`: a C accelerator, which grimp takes for its package
            edges[module].add(imported)
    return edges


def _a_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        path.append(module)
        for imported in sorted(edges[module]):
            cycle = visit(imported)
            if cycle is not None:
                return cycle
        path.pop()
        done.add(module)
        return None

    for module in sorted(edges):
        cycle = visit(module)
        if cycle is not None:
            return cycle
    return None


def test_the_modules_of_state_import_one_another_without_a_cycle() -> None:
    cycle = _a_cycle(_imports())
    assert cycle is None, " -> ".join(cycle or [])


def test_a_cycle_is_found() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _a_cycle(edges) == ["a", "b", "c", "a"]
