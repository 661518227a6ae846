"""Native checkpoints under both compaction styles: rounds of changes, each checkpointed
incrementally by files while RocksDB compacts, restore the model's state at the same
parallelism and rescaled, whichever style wrote them and whichever the restore uses."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.state import (
    RocksDBKeyedStateBackend,
    RocksDBOptions,
    Types,
    ValueStateDescriptor,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.keygroups.hashing import key_group_assigner

DESC = ValueStateDescriptor("v", Types.LONG())
MAX_P, N, ROUNDS = 128, 6_000, 8
STYLES = {
    "level": RocksDBOptions(compaction_trigger=2, write_buffer_bytes=64 << 10),
    "universal": RocksDBOptions(
        compaction_style="universal", compaction_trigger=3, write_buffer_bytes=64 << 10
    ),
}


def _backend(root: Path, opts: RocksDBOptions, **kw: object) -> RocksDBKeyedStateBackend:
    return RocksDBKeyedStateBackend(tempfile.mkdtemp(dir=root), options=opts, **kw)  # type: ignore[arg-type]


def _write_rounds(root: Path, opts: RocksDBOptions) -> tuple[dict[int, int], CompletedCheckpoint, int]:
    """The model, the last of ROUNDS incremental native checkpoints, and the SST files the
    checkpoints referenced in all (more than the last holds when compaction replaced some)."""
    assign = key_group_assigner(Types.LONG())
    subtasks = [
        _backend(root, opts, key_type=Types.LONG(), max_parallelism=MAX_P,
                 key_group_range=compute_key_group_range_for_operator_index(MAX_P, 2, i))
        for i in range(2)
    ]  # fmt: skip
    storage = CheckpointStorage(str(root / "chk"), retain=ROUNDS, rocksdb_format="native")
    model: dict[int, int] = {}
    rng = random.Random(7)
    seen: set[str] = set()
    last = None
    try:
        for r in range(ROUNDS):
            keys = range(N) if r == 0 else rng.sample(range(N), N // 10)
            for k in keys:
                b = subtasks[assign(k, MAX_P) >= MAX_P // 2]
                b.set_current_key(k)
                if r and k % 17 == 0:
                    b.get_state(DESC).clear()
                    model.pop(k, None)
                else:
                    b.get_state(DESC).update(k * 1000 + r)
                    model[k] = k * 1000 + r
            pending = storage.begin()
            for i, b in enumerate(subtasks):
                pending.write_subtask("op", i, 2, MAX_P, keyed=b)
            last = pending.commit()
            seen |= {f.ref.path for st in last.manifest.operators[0].subtasks
                     for f in st.native.files if f.sst}  # type: ignore[union-attr]  # fmt: skip
    finally:
        for b in subtasks:
            b.close()
    assert last is not None
    return model, last, len(seen)


@pytest.mark.parametrize("written_by", sorted(STYLES))
@pytest.mark.parametrize("restored_with", sorted(STYLES))
@pytest.mark.parametrize("p", [2, 3])
def test_restore_after_compacting_rounds(tmp_path: Path, written_by: str, restored_with: str, p: int) -> None:
    model, last, referenced = _write_rounds(tmp_path, STYLES[written_by])
    held = {f.ref.path for st in last.manifest.operators[0].subtasks for f in st.native.files if f.sst}  # type: ignore[union-attr]
    assert referenced > len(held), "the rounds should have compacted some files away"
    got: dict[int, int] = {}
    for i in range(p):
        factory = lambda **kw: _backend(tmp_path, STYLES[restored_with], **kw)  # noqa: E731
        b = last.keyed_backend("op", i, p, backend_factory=factory)
        try:
            for k in b.get_keys("v"):
                b.set_current_key(k)
                assert k not in got
                got[k] = b.get_state(DESC).value()
        finally:
            b.close()
    assert got == model
