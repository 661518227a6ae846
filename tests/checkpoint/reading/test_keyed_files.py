"""Reading chosen key groups of a state (checkpoint/keyed_files.py): the one path of restores,
the Spark reader and the change feed, checked against pyarrow reading the files directly."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from checkpoint_data import VALUE, fill, subtask_backend

from flinkstate.checkpoint import (
    CheckpointCorruptError,
    CheckpointStorage,
    CompletedCheckpoint,
    KeyGroupFiles,
    key_group_files,
    only_key_groups,
    open_checkpoint,
    read_key_groups,
)
from flinkstate.checkpoint.reading.keyed_files import chunks
from flinkstate.state import KeyGroupRange, assign_to_key_group

SOURCES = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def chained(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    """Subtask 0 of 2 (max parallelism 16), checkpointed three times incrementally: each
    state is a chain of files, later ones holding deletes."""
    root = str(tmp_path_factory.mktemp("keyed_files") / "root")
    storage = CheckpointStorage(
        root, retain=5, incremental=True, max_chain_files=10, max_chain_bytes_ratio=100.0
    )
    backend = subtask_backend(16, KeyGroupRange(0, 7))
    for version in range(3):
        fill(backend, range(version * 20, 200, 3), version)
        if version:
            for key in range(0, 200, 11):
                if assign_to_key_group(key, 16) not in backend.key_group_range:
                    continue
                backend.set_current_key(key)
                backend.get_state(VALUE).clear()
        pending = storage.begin()
        pending.write_keyed("op", backend, subtask=0, parallelism=2)
        pending.commit()
    opened = open_checkpoint(root)
    assert isinstance(opened, CompletedCheckpoint)
    return opened


def _files(checkpoint: CompletedCheckpoint, state: str) -> KeyGroupFiles:
    (subtask,) = checkpoint.operator("op").subtasks
    return key_group_files(subtask.keyed[state])


def _model(checkpoint: CompletedCheckpoint, files: KeyGroupFiles) -> dict[int, list[pa.Table]]:
    """Each file read whole by pyarrow, split by its ``key_group`` column, in file order."""
    out: dict[int, list[pa.Table]] = {}
    for ref, pairs in files:
        table = pq.read_table(str(Path(checkpoint.directory.url) / ref.path))
        for kg, _ in pairs:
            out.setdefault(kg, []).append(table.filter(pc.equal(table.column("key_group"), kg)))
    return out


@pytest.mark.parametrize("state", ["value", "list", "map"])
@pytest.mark.parametrize(("batch", "max_rows"), [(None, None), (1, None), (3, None), (None, 1), (3, 25)])
def test_key_groups_read_as_the_files_hold_them(
    chained: CompletedCheckpoint, state: str, batch: int | None, max_rows: int | None
) -> None:
    files = _files(chained, state)
    assert len(files) > 1  # a chain: several files per key group
    got = list(
        read_key_groups(chained.directory, files, chained.checkpoint_id, batch=batch, max_rows=max_rows)
    )
    assert [kg for kg, _ in got] == sorted({kg for _, pairs in files for kg, _ in pairs})
    model = _model(chained, files)
    for kg, tables in got:
        assert [t.to_pylist() for t in tables] == [t.to_pylist() for t in model[kg]]


@pytest.mark.parametrize(("batch", "max_rows"), [(None, None), (2, None), (None, 10), (3, 10), (None, 0)])
def test_chunks_bound_key_groups_and_rows(batch: int | None, max_rows: int | None) -> None:
    rows = {0: 4, 1: 30, 2: 3, 3: 3, 5: 0, 7: 9, 8: 2}
    got = list(chunks(sorted(rows), rows, batch, max_rows))
    assert [kg for chunk in got for kg in sorted(chunk)] == sorted(rows)  # every group once, in order
    for chunk, after in zip(got, [*got[1:], None], strict=True):
        assert batch is None or len(chunk) <= batch
        held = sum(rows[kg] for kg in chunk)
        assert max_rows is None or held <= max_rows or len(chunk) == 1
        if after is not None:  # cut only where a bound says so
            nxt = min(after)
            assert len(chunk) == batch or (max_rows is not None and held + rows[nxt] > max_rows)


def test_chosen_key_groups_only(chained: CompletedCheckpoint) -> None:
    files = only_key_groups(_files(chained, "value"), {2, 5})
    assert {kg for kg, _ in read_key_groups(chained.directory, files, chained.checkpoint_id)} == {2, 5}
    assert dict(chained.read_keyed("op", "value", {2, 5})).keys() == {2, 5}


def test_columns_are_pruned_only_where_nothing_is_merged(chained: CompletedCheckpoint) -> None:
    ref = chained.operator("op").subtasks[0].keyed["map"][0]
    one = key_group_files([ref], {3})
    ((_, (table,)),) = read_key_groups(chained.directory, one, chained.checkpoint_id, columns={"key"})
    full = _model(chained, one)[3][0]
    assert table.schema == full.schema and table.column("key") == full.column("key")
    assert table.column("value").null_count == table.num_rows  # not decoded
    many = only_key_groups(_files(chained, "map"), {3})
    for _, tables in read_key_groups(chained.directory, many, chained.checkpoint_id, columns={"key"}):
        assert all(t.column("value").null_count < t.num_rows for t in tables if t.num_rows)


def test_a_damaged_file_is_named_with_its_checkpoint(chained: CompletedCheckpoint, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(Path(chained.directory.url).parent, copy)
    damaged = open_checkpoint(str(copy))
    assert isinstance(damaged, CompletedCheckpoint)
    files = _files(damaged, "value")
    target = Path(damaged.directory.url) / files[0][0].path
    target.write_bytes(target.read_bytes()[:-50])
    pattern = rf"\[CHECKPOINT_CORRUPT\].*{re.escape(Path(files[0][0].path).name)}.*checkpoint 3"
    with pytest.raises(CheckpointCorruptError, match=pattern):
        list(read_key_groups(damaged.directory, files, damaged.checkpoint_id))
    with pytest.raises(CheckpointCorruptError, match=pattern):
        damaged.keyed_backend("op", 0, 2)


def test_key_groups_are_read_in_one_place() -> None:
    """No other module opens a state's files by key group: one copy cannot drift."""
    callers = {
        str(path.relative_to(SOURCES))
        for folder in ("checkpoint", "connector", "cli")
        for path in (SOURCES / folder).rglob("*.py")
        if re.search(r"\b(open_verified|read_row_groups)\(", path.read_text())
    }
    assert callers == {
        "checkpoint/reading/keyed_files.py",
        "checkpoint/reading/verified.py",
        "checkpoint/parquet_files.py",
    }
