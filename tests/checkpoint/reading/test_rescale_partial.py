"""Partial reads: subtask i of p opens only the files holding its key groups and reads
only their row groups (plus footers), counted by the Storage the checkpoint reads from."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint, Manifest, Storage
from flinkstate.checkpoint.manifest import FileRef
from flinkstate.state import (
    HeapKeyedStateBackend,
    KeyGroupRange,
    ListStateDescriptor,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index as key_groups_of

MAX_P = 128
KEYS = [f"user-{i:05d}" for i in range(6000)]
VALUE = ValueStateDescriptor("value", Types.STRING())
LIST = ListStateDescriptor("list", Types.LONG())


def blob(key_group: int) -> bytes:
    return random.Random(key_group).randbytes(2000)  # incompressible


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    """A checkpoint of 3 subtasks, two keyed states each, raw keyed state too."""
    root = tmp_path_factory.mktemp("partial") / "root"
    pending = CheckpointStorage(str(root)).begin()
    for i in range(3):
        rng = key_groups_of(MAX_P, 3, i)
        backend = HeapKeyedStateBackend(key_type=Types.STRING(), key_group_range=rng)
        for n, key in enumerate(KEYS):
            if assign_to_key_group(key, MAX_P) in rng:
                backend.set_current_key(key)
                backend.get_state(VALUE).update(f"value of {key} " * 3)
                backend.get_list_state(LIST).add_all(range(n % 5 + 1))
        raw = {kg: blob(kg) for kg in rng}
        pending.write_subtask("op", i, 3, MAX_P, keyed=backend, raw_keyed=raw)
    manifest = pending.commit().manifest
    return root / "chk-1", manifest


def fresh(directory: Path, manifest: Manifest) -> CompletedCheckpoint:
    """A checkpoint over a Storage that has read nothing yet."""
    return CompletedCheckpoint(Storage(str(directory)), manifest)


def keyed_files(manifest: Manifest) -> list[FileRef]:
    return [ref for st in manifest.operators[0].subtasks for refs in st.keyed.values() for ref in refs]


def row_group_bytes(path: Path) -> list[int]:
    meta = pq.ParquetFile(path).metadata
    return [
        sum(meta.row_group(g).column(c).total_compressed_size for c in range(meta.num_columns))
        for g in range(meta.num_row_groups)
    ]


def bounds(directory: Path, refs: list[FileRef], rng: KeyGroupRange) -> tuple[int, int, int]:
    """(files holding key groups of ``rng``, bytes of their row groups, bytes of those files
    without the row groups of other key groups)."""
    opened, wanted, at_most = 0, 0, 0
    for ref in refs:
        mine = [rg for kg, (rg, _) in ref.key_groups.items() if kg in rng]
        if not mine:
            continue
        sizes = row_group_bytes(directory / ref.path)
        opened += 1
        wanted += sum(sizes[rg] for rg in mine)
        at_most += ref.size - sum(s for rg, s in enumerate(sizes) if rg not in mine)
    return opened, wanted, at_most


@pytest.mark.parametrize(("subtask", "parallelism"), [(0, 4), (1, 4), (3, 4), (0, 6), (4, 6), (9, 10)])
def test_a_subtask_reads_only_its_key_groups(
    written: tuple[Path, Manifest], subtask: int, parallelism: int
) -> None:
    directory, manifest = written
    full = fresh(directory, manifest)
    everything = full.keyed_backend("op", 0, 1)
    assert full.directory.files_opened == len(keyed_files(manifest)) == 6

    part = fresh(directory, manifest)
    backend = part.keyed_backend("op", subtask, parallelism)
    rng = key_groups_of(MAX_P, parallelism, subtask)
    opened, wanted, at_most = bounds(directory, keyed_files(manifest), rng)
    assert part.directory.files_opened == opened
    assert wanted <= part.directory.bytes_read <= at_most

    mine = [k for k in KEYS if assign_to_key_group(k, MAX_P) in rng]
    assert sorted(backend.get_keys("value")) == mine
    for key in mine[:: max(1, len(mine) // 20)]:
        backend.set_current_key(key)
        everything.set_current_key(key)
        assert backend.get_state(VALUE).value() == everything.get_state(VALUE).value()
        assert list(backend.get_list_state(LIST).get()) == list(everything.get_list_state(LIST).get())


def test_one_of_four_reads_well_under_a_full_restore(written: tuple[Path, Manifest]) -> None:
    directory, manifest = written
    full = fresh(directory, manifest)
    full.keyed_backend("op", 0, 1)
    for subtask in range(4):
        part = fresh(directory, manifest)
        part.keyed_backend("op", subtask, 4)
        assert part.directory.bytes_read < 0.35 * full.directory.bytes_read, subtask


def test_a_range_inside_one_old_subtask_opens_only_its_files(written: tuple[Path, Manifest]) -> None:
    directory, manifest = written
    part = fresh(directory, manifest)
    part.keyed_backend("op", 0, 6)  # key groups 0..21: all in old subtask 0 (0..42)
    old = manifest.operators[0].subtasks
    assert part.directory.files_opened == len(old[0].keyed) == 2
    part.read_keyed("op", "value", KeyGroupRange(100, 100)).__next__()
    assert part.directory.files_opened == 3  # one key group of one state: one more file


def test_raw_keyed_state_reads_only_its_key_groups(written: tuple[Path, Manifest]) -> None:
    directory, manifest = written
    raw_files = [st.raw_keyed for st in manifest.operators[0].subtasks if st.raw_keyed is not None]
    everything = fresh(directory, manifest)
    assert len(everything.raw_keyed("op", 0, 1)) == MAX_P
    part = fresh(directory, manifest)
    blobs = part.raw_keyed("op", 2, 4)
    rng = key_groups_of(MAX_P, 4, 2)
    assert blobs == {kg: blob(kg) for kg in rng}
    opened, wanted, at_most = bounds(directory, raw_files, rng)
    assert part.directory.files_opened == opened == 2
    assert wanted <= part.directory.bytes_read <= at_most
    assert part.directory.bytes_read < 0.4 * everything.directory.bytes_read
