"""A commit's retention uses the manifest it just published instead of reading it back, and
deletes exactly what a retention pass that reads every manifest deletes, on every storage."""

from __future__ import annotations

from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.checkpoint.writing import versions as versions_module
from flinkstate.state import HeapKeyedStateBackend, Types, ValueStateDescriptor


@pytest.mark.parametrize("incremental", [True, False])
def test_commit_retention_is_a_full_retention_pass(
    location: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch, incremental: bool
) -> None:
    read: list[int] = []
    load = versions_module.load_version

    def counting(root: Any, version: int) -> Any:
        read.append(version)
        return load(root, version)

    monkeypatch.setattr(versions_module, "load_version", counting)
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    state = backend.get_state(ValueStateDescriptor("v", Types.LONG()))
    storage = CheckpointStorage(*location, retain=2, incremental=incremental, max_chain_files=3)
    model: dict[int, int] = {}
    for i in range(7):
        for k in range(i * 10, i * 10 + 30):
            backend.set_current_key(k)
            state.update(k + i)
            model[k] = k + i
        read.clear()
        pending = storage.begin()
        pending.write_keyed("op", backend)
        done = pending.commit()
        gc_reads = read[1:] if incremental and i else read  # an increment first reads its base
        assert done.checkpoint_id not in gc_reads  # retention did not read it back
        assert storage.cleanup(dry_run=True).deleted == ()  # nothing a full pass would still delete
        restored = storage.load().keyed_backend("op", 0, 1)
        view = restored.get_state(ValueStateDescriptor("v", Types.LONG()))
        got = {}
        for k in range(i * 10 + 40):
            restored.set_current_key(k)
            if view.value() is not None:
                got[k] = view.value()
        assert got == model
        restored.close()
    assert storage.completed_ids() == [6, 7]
