"""The checkpoint of the savepoint writer's model (``write_model.py``), built once."""

from __future__ import annotations

import pytest
from write_model import build_checkpoint

from flinkstate.checkpoint import CompletedCheckpoint


@pytest.fixture(scope="session")
def model_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build_checkpoint(str(tmp_path_factory.mktemp("model") / "checkpoint"))
