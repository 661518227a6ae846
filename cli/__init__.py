"""The ``flinkstate`` command line (``flinkstate.cli``): list, inspect, show, skew, verify,
rescale and gc for checkpoints and savepoints on any fsspec filesystem, with no Spark.

Built on typer and rich (matplotlib for ``skew --png``); it uses the checkpoint layer's
public functions only, never the connector.
"""

from . import needs_extras  # noqa: F401  (first: without typer or rich, one clear error)
from .app import app, main

__all__ = ["app", "main"]
