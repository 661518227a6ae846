"""`flinkstate list` reads full/incremental from the manifest of an incremental checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.cli.app import app
from flinkstate.state import HeapKeyedStateBackend, Types, ValueStateDescriptor


def test_list_shows_incremental_checkpoints(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    storage = CheckpointStorage(root, incremental=True)
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    state = backend.get_state(ValueStateDescriptor("v", Types.LONG()))
    for round_ in range(2):
        for k in range(100 if round_ == 0 else 3):
            backend.set_current_key(k)
            state.update(k + round_)
        pending = storage.begin()
        pending.write_keyed("op", backend)
        completed = pending.commit()
        backend.notify_checkpoint_complete(completed.checkpoint_id)
    result = CliRunner().invoke(app, ["list", root, "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["checkpoint_id"]: r["type"] for r in json.loads(result.output)["checkpoints"]}
    assert rows == {1: "full", 2: "incremental"}
