"""Shipping a user's function to the executors: by reference where they can import its
modules, by value where they cannot.

Spark pickles a task's closure with the cloudpickle it bundles (``pyspark.cloudpickle``),
which names a class or function by its module: an executor that cannot import that module
(a script's helper module, a notebook's package) fails deep in its worker with
``ModuleNotFoundError``. Before a run the function is pickled once, recording every module
it names. Those not installed (the standard library, site-packages, flinkstate, PySpark)
are imported on the executors in one tiny job (remembered per session and module); each
one that fails there is registered with ``pyspark.cloudpickle`` to travel by value (its
code goes with the task), and the function is pickled again, since code shipped by value
names modules of its own. The registration is kept: any later pickle of that module's
objects for these executors needs it too. A module that cannot travel by value (compiled
code) or a function that does not pickle is ``[FUNCTION_NOT_SHIPPABLE]``, before any task
of the run starts.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import io
import os
import pickle
import site
import sys
import sysconfig
import types
from collections.abc import Iterable, Iterator
from functools import lru_cache, partial
from typing import Any

import pyarrow as pa

from ..errors import ProcessError

_OURS = ("flinkstate", "pyspark", "pyspark_flinkstate", "py4j", "pyarrow")
"""Top-level packages every executor running flinkstate has."""
_CHECKED_MAX = 256
_CHECKED: dict[tuple[int, str], tuple[Any, str | None]] = {}
"""Modules tried on a session's executors: (session id, module) -> (session, import error)."""
_CHECK_SCHEMA = "module string, error string"
_HINT = (
    "install it where the executors' Python finds it, or ship it with "
    "spark.sparkContext.addPyFile(...) / spark-submit --py-files"
)


def ship(spark: Any, function: Any) -> tuple[str, ...]:
    """Make ``function`` picklable for the executors of ``spark``; return the modules now
    shipped by value (registered by this call or before)."""
    cloudpickle = _cloudpickle()
    while True:
        names = _named_modules(function)
        candidates = sorted(n for n in names if not _by_value(n) and not _installed(n))
        missing = _missing_on_executors(spark, candidates)
        for name, error in missing.items():
            module = sys.modules[name]
            if _compiled(module):
                raise ProcessError(
                    f"{_describe(function)} uses module {name!r}, which the executors cannot import "
                    f"({error}) and which is compiled code, so it cannot be shipped with the task: {_HINT}",
                    code="FUNCTION_NOT_SHIPPABLE",
                )
            cloudpickle.register_pickle_by_value(module)
        if not missing:
            return tuple(sorted(n for n in names if _by_value(n) and n in sys.modules and n != "__main__"))


def _describe(function: Any) -> str:
    kind = type(function)
    return f"function {kind.__qualname__} (module {kind.__module__!r})"


def _named_modules(function: Any) -> set[str]:
    """The modules a pickle of ``function`` names (``pyspark.cloudpickle``, as Spark pickles)."""
    names: set[str] = set()

    class Recorder(_cloudpickle().Pickler):  # type: ignore[misc]
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, types.ModuleType):
                names.add(obj.__name__)
            elif isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType):
                module = getattr(obj, "__module__", None)
                if isinstance(module, str):
                    names.add(module)
            return super().reducer_override(obj)

    try:
        Recorder(io.BytesIO(), protocol=pickle.DEFAULT_PROTOCOL).dump(function)
    except Exception as exc:
        shipped = sorted(n for n in _registry() if n in sys.modules)
        how = (
            f" (modules shipped by value, as the executors cannot import them: {shipped})" if shipped else ""
        )
        raise ProcessError(
            f"{_describe(function)} cannot be pickled for the executors{how}: "
            f"{type(exc).__name__}: {exc}. Keep unpicklable objects (locks, files, clients) out of the "
            "function and of the module-level names its code uses (create them in open()), or, for a "
            f"module of yours: {_HINT}",
            code="FUNCTION_NOT_SHIPPABLE",
        ) from exc
    return names


def _cloudpickle() -> Any:
    """The cloudpickle Spark pickles tasks with (untyped)."""
    from pyspark import cloudpickle

    return cloudpickle


def _registry() -> set[str]:
    return set(_cloudpickle().list_registry_pickle_by_value())


def _by_value(name: str) -> bool:
    """Whether cloudpickle ships ``name`` by value (``__main__``, or it or a parent registered)."""
    registry = _registry()
    parts = name.split(".")
    return name == "__main__" or any(".".join(parts[:i]) in registry for i in range(1, len(parts) + 1))


@lru_cache(maxsize=1)
def _install_roots() -> tuple[str, ...]:
    """Where installed code lives: the interpreter's prefixes and site directories."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, *sysconfig.get_paths().values()}
    paths.update(site.getsitepackages())
    paths.add(site.getusersitepackages())
    return tuple(sorted({os.path.join(os.path.realpath(p), "") for p in paths if p}))


def _installed(name: str) -> bool:
    """Whether ``name`` is code every executor has (no need to ask them)."""
    top = name.partition(".")[0]
    if top in _OURS or top in sys.stdlib_module_names or name in sys.builtin_module_names:
        return True
    module = sys.modules.get(name)
    if module is None:  # cloudpickle cannot look it up: it pickles what is in it by value
        return True
    origin = getattr(module, "__file__", None)
    return isinstance(origin, str) and os.path.realpath(origin).startswith(_install_roots())


def _compiled(module: types.ModuleType) -> bool:
    origin = getattr(module, "__file__", None) or ""
    return module.__name__ in sys.builtin_module_names or origin.endswith(
        tuple(importlib.machinery.EXTENSION_SUFFIXES)
    )


def _missing_on_executors(spark: Any, names: Iterable[str]) -> dict[str, str]:
    """Of ``names``, those the executors of ``spark`` cannot import, with the error."""
    wanted = [n for n in names if _CHECKED.get((id(spark), n), (None, None))[0] is not spark]
    if wanted:
        found = spark.range(0, 1, 1, 1).mapInArrow(partial(_try_imports, tuple(wanted)), _CHECK_SCHEMA)
        errors = {row[0]: row[1] for row in found.collect()}
        if len(_CHECKED) + len(wanted) > _CHECKED_MAX:
            _CHECKED.clear()
        for name in wanted:
            _CHECKED[(id(spark), name)] = (spark, errors.get(name))
    out: dict[str, str] = {}
    for name in names:
        error = _CHECKED[(id(spark), name)][1]
        if error is not None:
            out[name] = error
    return out


def _try_imports(names: tuple[str, ...], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """In a task: the modules of ``names`` that fail to import, with the error."""
    for _ in batches:
        pass
    failed: list[tuple[str, str]] = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed.append((name, f"{type(exc).__name__}: {exc}"))
    yield pa.RecordBatch.from_pylist(
        [{"module": n, "error": e} for n, e in failed],
        schema=pa.schema([pa.field("module", pa.string()), pa.field("error", pa.string())]),
    )
