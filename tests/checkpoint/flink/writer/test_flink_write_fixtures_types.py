"""Savepoints with Tuple, Row and POJO keys and POJO values that our writer produced and Flink
2.3 restored (``tests/fixtures/flink/written/types-*``): the writer still writes them byte for
byte, our reader reads the model from them (each key in Flink's key group), and what Flink
printed after restoring them on each backend is the model's live rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from flink_model import FIXTURES
from flink_restore import check_restored, spec_text
from test_flink_write_types import _read_rows
from types_model import TYPED_WRITES, types_model
from write_model import build_checkpoint, rows

from flinkstate.checkpoint import CompletedCheckpoint
from flinkstate.checkpoint.flink import read_savepoint, write_savepoint

COMMITTED = FIXTURES / "written"


@pytest.fixture(scope="module")
def typed_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build_checkpoint(str(tmp_path_factory.mktemp("typed") / "checkpoint"), types_model())


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("name", sorted(TYPED_WRITES))
def test_writer_still_writes_the_committed_savepoint(
    typed_checkpoint: CompletedCheckpoint, tmp_path: Path, name: str
) -> None:
    write_savepoint(typed_checkpoint, str(tmp_path / "sp"), **TYPED_WRITES[name])
    assert _files(tmp_path / "sp") == _files(COMMITTED / f"types-{name}" / "savepoint")


@pytest.mark.parametrize("name", sorted(TYPED_WRITES))
def test_committed_savepoint_reads_back_and_writes_back(tmp_path: Path, name: str) -> None:
    committed = COMMITTED / f"types-{name}" / "savepoint"
    sp = read_savepoint(str(committed))
    assert _read_rows(sp) == set(rows(models=types_model()))
    write_savepoint(sp, str(tmp_path / "sp"))
    assert _files(tmp_path / "sp") == _files(committed)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("name", sorted(TYPED_WRITES))
def test_what_flink_restored(name: str, backend: str) -> None:
    args, models = TYPED_WRITES[name], types_model()
    spec = (COMMITTED / f"types-{name}" / "spec.tsv").read_text(encoding="utf-8")
    assert spec == spec_text(args["parallelism"], args["max_parallelism"], models)
    restored = COMMITTED / f"types-{name}" / f"restored-{backend}.tsv"
    lines = restored.read_text(encoding="utf-8").splitlines()
    check_restored(lines, args["parallelism"], args["max_parallelism"], models)
