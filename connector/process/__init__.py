"""The runner: ``process``, ``foreach_batch`` and ``coprocess`` run process functions on
Spark executors, one key-group range per Spark task, and commit one checkpoint per run.

The driver side parses a run's arguments (:mod:`.job`), reads its input (:mod:`.inputs`,
:mod:`.routing`) and runs it (:mod:`.run`: the base, the plan, the tasks, the commit), placing
tasks where their state is (:mod:`.placement`) and shipping the function's modules
(:mod:`.shipping`); the task side is :mod:`.task`. Both use :mod:`.names`, the declared
output (:mod:`.output`, :mod:`.side_outputs`).
"""

from .api import foreach_batch, process
from .committed import read_side_output
from .coprocess import coprocess

__all__ = ["coprocess", "foreach_batch", "process", "read_side_output"]
