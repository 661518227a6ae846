"""Rescaling: state written by 3 subtasks (max parallelism 128) restored at 1, 2, 5 and 7,
checkpointed there and restored at 3 again; keyed, operator (split, union, broadcast)
and raw state each arrive exactly once (or, by mode, everywhere)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from rescale_job import (
    KEYS,
    LIST,
    MAP,
    MAX_P,
    SPREAD,
    UNION,
    VALUE,
    check_subtasks,
    restore_all,
    write_initial,
)

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index as key_groups_of


@pytest.mark.parametrize(
    ("where", "new_p"), [("memory", 1), ("memory", 2), ("local", 5), ("memory", 7), ("local", 3)]
)
def test_keyed_and_operator_state_rescale_and_back(tmp_path: Path, where: str, new_p: int) -> None:
    url = f"memory://rescale/{uuid.uuid4().hex}" if where == "memory" else str(tmp_path / "root")
    written, _ = write_initial(url)
    assert len(written) > 4 * len(KEYS)
    rescaled = restore_all(open_checkpoint(url), new_p)
    check_subtasks(rescaled, written, kept=new_p == 3)
    # reads through the state API on the subtask that owns a key
    owner = {k: i for i, (b, _) in enumerate(rescaled) for k in b.get_keys("value")}
    assert sorted(owner, key=lambda k: k[1]) == KEYS
    keyed = rescaled[owner[KEYS[35]]][0]
    keyed.set_current_key(KEYS[35])
    assert keyed.get_state(VALUE).value() == (35, None)
    assert list(keyed.get_partitioned_state(("window", 2), LIST).get()) == ["w35"]
    assert keyed.get_aggregating_state(SPREAD).get() == 35
    assert dict(keyed.get_map_state(MAP).items()) == {35: 17.5, -35: float("-inf")}

    pending = CheckpointStorage(url).begin()
    for i, (keyed, ops) in enumerate(rescaled):
        union = ops.get_union_list_state(UNION)  # an operator keeps its share of union state
        union.update(sorted(union.get())[i::new_p])
        pending.write_subtask("op", i, new_p, MAX_P, keyed=keyed, operator=ops)
    pending.commit()
    assert open_checkpoint(url).manifest.operators[0].parallelism == new_p
    check_subtasks(restore_all(open_checkpoint(url), 3), written, kept=new_p == 3)  # back at 3


@pytest.mark.parametrize("new_p", [1, 2, 5, 7, 3])
def test_raw_state_redistributes(tmp_path: Path, new_p: int) -> None:
    _, checkpoint = write_initial(f"memory://rescale/{uuid.uuid4().hex}")
    seen: list[int] = []
    blobs: list[list[bytes]] = []
    for i in range(new_p):
        raw = checkpoint.raw_keyed("op", i, new_p)
        owned = key_groups_of(MAX_P, new_p, i)
        assert set(raw) == set(owned)  # every key group of the range, empty blobs too
        assert all(data == f"raw-{kg}".encode() * (kg % 3) for kg, data in raw.items())
        seen += raw
        blobs.append(checkpoint.raw_operator("op", i, new_p))
    assert sorted(seen) == list(range(MAX_P))
    everything = [f"blob-{i}-{j}".encode() for i in range(3) for j in range(i + 2)]
    assert sorted(b for part in blobs for b in part) == sorted(everything)
    if new_p == 3:  # unchanged parallelism: each subtask keeps its own
        assert blobs == [[f"blob-{i}-{j}".encode() for j in range(i + 2)] for i in range(3)]
    else:
        assert max(map(len, blobs)) - min(map(len, blobs)) <= 1


def test_raw_state_alone_without_keyed_state(tmp_path: Path) -> None:
    pending = CheckpointStorage(str(tmp_path / "root")).begin()
    for i in range(2):
        rng = key_groups_of(16, 2, i)
        pending.write_subtask(
            "raw", i, 2, 16, raw_keyed={kg: bytes([kg]) for kg in rng if kg % 2}, raw_operator=[b"x" * i],
            key_group_range=rng,
        )  # fmt: skip
    checkpoint = pending.commit()
    assert checkpoint.manifest.operators[0].subtasks[1].key_group_range == (8, 15)
    parts = [checkpoint.raw_keyed("raw", i, 3) for i in range(3)]
    assert {kg: b for part in parts for kg, b in part.items()} == {kg: bytes([kg]) for kg in range(1, 16, 2)}
    for i, part in enumerate(parts):
        assert set(part) <= set(key_groups_of(16, 3, i))
    assert sorted(b for i in range(3) for b in checkpoint.raw_operator("raw", i, 3)) == [b"", b"x"]
    restored = checkpoint.keyed_backend("raw", 0, 1)  # no keyed state: an empty backend
    assert restored.state_names() == [] and restored.max_parallelism == 16
