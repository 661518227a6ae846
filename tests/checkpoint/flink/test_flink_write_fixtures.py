"""Savepoints our writer produced and Flink 2.3 restored (``tests/fixtures/flink/written``):
the writer still writes them byte for byte, our reader reads the model from them, and what
Flink printed after restoring them on each backend is the model's live rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from flink_model import FIXTURES
from flink_restore import check_restored, spec_text
from test_flink_write import read_rows
from write_model import WRITTEN, rows

from flinkstate.checkpoint import CompletedCheckpoint
from flinkstate.checkpoint.flink import read_savepoint, write_savepoint

COMMITTED = FIXTURES / "written"


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_writer_still_writes_the_committed_savepoint(
    model_checkpoint: CompletedCheckpoint, tmp_path: Path, name: str
) -> None:
    write_savepoint(model_checkpoint, str(tmp_path / "sp"), **WRITTEN[name])
    assert _files(tmp_path / "sp") == _files(COMMITTED / name / "savepoint")


def test_committed_savepoints_have_both_handle_kinds() -> None:
    assert sorted(_files(COMMITTED / "inline" / "savepoint")) == ["_metadata"]
    sp = read_savepoint(str(COMMITTED / "mixed" / "savepoint"))
    kinds = {s.managed_keyed.stream.kind for o in sp.operators for s in o.subtasks if s.managed_keyed}
    assert kinds == {"bytes", "relative"}


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_committed_savepoint_reads_back(name: str) -> None:
    assert read_rows(read_savepoint(str(COMMITTED / name / "savepoint"))) == set(rows())


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_what_flink_restored(name: str, backend: str) -> None:
    args = WRITTEN[name]
    assert (COMMITTED / name / "spec.tsv").read_text(encoding="utf-8") == spec_text(
        args["parallelism"], args["max_parallelism"]
    )
    lines = (COMMITTED / name / f"restored-{backend}.tsv").read_text(encoding="utf-8").splitlines()
    check_restored(lines, args["parallelism"], args["max_parallelism"])
