"""Optional dependencies: the core reads and writes checkpoints and savepoints with pyarrow,
fsspec and cloudpickle alone; each other dependency comes with an extra of the package, and a
missing one is a :class:`MissingExtraError` naming the extra that installs it."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingExtraError

EXTRAS = {
    "pyspark": "spark",
    "rocksdict": "rocksdb",
    "s3fs": "s3",
    "typer": "cli",
    "rich": "cli",
    "matplotlib": "plot",
}
"""The module each extra of the package installs, by the module's top-level name."""


def require(module: str, feature: str) -> ModuleType:
    """``module`` imported, or a :class:`MissingExtraError` saying ``feature`` needs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing(module, feature) from exc


def missing(module: str, feature: str) -> MissingExtraError:
    """The error saying ``feature`` needs ``module`` and which extra installs it."""
    extra = EXTRAS[module.split(".")[0]]
    return MissingExtraError(
        f"{feature} needs {module.split('.')[0]}, which is not installed: pip install 'flinkstate[{extra}]' "
        "(or 'flinkstate[all]')"
    )
