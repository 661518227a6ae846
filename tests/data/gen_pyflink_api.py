"""Generate ``pyflink_api.json``: PyFlink's public state and process-function API.

Reads PyFlink's sources with :mod:`ast` (nothing of PyFlink is imported or installed)
from the ``apache-flink`` wheel or an unpacked ``pyflink`` directory::

    pip download --no-deps --only-binary :all: apache-flink==2.3.0 -d /tmp/pyflink
    python tests/data/gen_pyflink_api.py /tmp/pyflink/apache_flink-2.3.0-*.whl > tests/data/pyflink_api.json

Each class gets its public methods (and the dunders a user's code reaches with syntax:
``[]``, ``in``, ``for``), inherited ones included, with their parameters, and the names of
an enum's members. ``tests/state/test_pyflink_api.py`` checks flinkstate against it.
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

SELECTION: dict[str, tuple[str, list[str] | None]] = {
    # module: (file in the pyflink package, top-level classes; None: every public one)
    "pyflink.datastream.state": ("datastream/state.py", None),
    "pyflink.datastream.functions": (
        "datastream/functions.py",
        [
            "KeyedStateStore",
            "RuntimeContext",
            "Function",
            "ReduceFunction",
            "AggregateFunction",
            "KeyedProcessFunction",
            "BaseBroadcastProcessFunction",
            "KeyedBroadcastProcessFunction",
            "KeyedCoProcessFunction",
        ],
    ),
    "pyflink.datastream.timerservice": ("datastream/timerservice.py", ["TimerService"]),
    "pyflink.datastream.time_domain": ("datastream/time_domain.py", ["TimeDomain"]),
    "pyflink.datastream.output_tag": ("datastream/output_tag.py", ["OutputTag"]),
    "pyflink.common.typeinfo": ("common/typeinfo.py", ["TypeInformation", "Types"]),
    "pyflink.common.time": ("common/time.py", ["Duration", "Time"]),
    "pyflink.metrics.metricbase": (
        "metrics/metricbase.py",
        ["MetricGroup", "Metric", "Counter", "Meter", "Distribution"],
    ),
}
DUNDERS = {"__init__", "__iter__", "__getitem__", "__setitem__", "__delitem__", "__contains__"}


def _params(fn: ast.FunctionDef, static: bool) -> list[dict[str, Any]]:
    args = fn.args
    positional = args.posonlyargs + args.args
    first_default = len(positional) - len(args.defaults)
    out = [
        {"name": a.arg, "kind": "positional", "default": i >= first_default} for i, a in enumerate(positional)
    ][0 if static else 1 :]
    if args.vararg is not None:
        out.append({"name": args.vararg.arg, "kind": "var_positional", "default": True})
    out += [
        {"name": a.arg, "kind": "keyword", "default": d is not None}
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    if args.kwarg is not None:
        out.append({"name": args.kwarg.arg, "kind": "var_keyword", "default": True})
    return out


def _decorators(fn: ast.FunctionDef) -> set[str]:
    return {ast.unparse(d) for d in fn.decorator_list}


def _collect(node: ast.ClassDef, prefix: str, module: str, out: dict[str, dict[str, Any]]) -> None:
    name = f"{prefix}{node.name}"
    methods: dict[str, Any] = {}
    members: list[str] = []
    is_enum = any(ast.unparse(b).endswith("Enum") for b in node.bases)
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and (not item.name.startswith("_") or item.name in DUNDERS):
            decorators = _decorators(item)
            static = "staticmethod" in decorators
            methods[item.name] = {
                "params": _params(item, static),
                "static": static,
                "abstract": "abstractmethod" in decorators,
            }
        elif isinstance(item, ast.Assign) and is_enum:
            members += [t.id for t in item.targets if isinstance(t, ast.Name) and not t.id.startswith("_")]
        elif isinstance(item, ast.ClassDef) and not item.name.startswith("_"):
            _collect(item, f"{name}.", module, out)
    bases = [ast.unparse(b).split("[")[0] for b in node.bases]
    out[name] = {"module": module, "name": name, "bases": bases, "members": members, "methods": methods}


def _inherit(classes: dict[str, dict[str, Any]]) -> None:
    """Give each class the methods its bases (among the collected classes) define."""

    def lookup(base: str, scope: str) -> dict[str, Any] | None:
        parts = scope.split(".")
        for i in range(len(parts), -1, -1):  # nested names resolve from the inside out
            found = classes.get(".".join([*parts[:i], base]))
            if found is not None:
                return found
        return None

    def resolve(cls: dict[str, Any]) -> dict[str, Any]:
        methods: dict[str, Any] = {}
        scope = cls["name"].rpartition(".")[0]
        for base in reversed(cls["bases"]):
            found = lookup(base, scope)
            if found is not None and found is not cls:
                methods.update(resolve(found))
        methods.update(cls["methods"])
        return methods

    resolved = {name: resolve(cls) for name, cls in classes.items()}
    for name, methods in resolved.items():
        classes[name]["methods"] = dict(sorted(methods.items()))


def read_sources(source: Path) -> dict[str, str]:
    """The selected files' text, from a wheel or a ``pyflink`` directory."""
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            return {f: wheel.read(f"pyflink/{f}").decode() for f, _ in SELECTION.values()}
    return {f: (source / f).read_text() for f, _ in SELECTION.values()}


def generate(source: Path) -> dict[str, Any]:
    texts = read_sources(source)
    classes: dict[str, dict[str, Any]] = {}
    for module, (path, wanted) in SELECTION.items():
        found: dict[str, dict[str, Any]] = {}
        for node in ast.parse(texts[path]).body:
            public = isinstance(node, ast.ClassDef) and not node.name.startswith("_")
            if public and (wanted is None or node.name in wanted):
                _collect(node, "", module, found)
        classes.update(found)
    _inherit(classes)
    return {
        "source": f"apache-flink {source.name}, read with ast by tests/data/gen_pyflink_api.py",
        "classes": sorted(classes.values(), key=lambda c: (c["module"], c["name"])),
    }


if __name__ == "__main__":
    json.dump(generate(Path(sys.argv[1])), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
