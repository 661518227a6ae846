"""Savepoints our writer produced and Flink 2.3 restored (``tests/fixtures/flink/written``):
the writer still writes them byte for byte, and what Flink printed after restoring them on each
backend is the model's live rows. That our reader reads the model from them, and writes them back
on every storage unchanged for the reader, is the savepoint contract's
(``tests/contracts/test_savepoint.py``, its ``restored-*`` sources)."""

from __future__ import annotations

from pathlib import Path

import pytest
from flink_model import FIXTURES
from flink_restore import check_restored, spec_text
from operator_views import expected_operator_states, operator_view
from write_model import WRITTEN, build_checkpoint, read_rows, rows

from flinkstate.checkpoint import CompletedCheckpoint
from flinkstate.checkpoint.flink import (
    operator_id_hex,
    read_savepoint,
    write_savepoint,
)

COMMITTED = FIXTURES / "written"


@pytest.fixture(scope="module")
def model_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build_checkpoint(str(tmp_path_factory.mktemp("model") / "checkpoint"))


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


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_what_flink_restored(name: str, backend: str) -> None:
    args = WRITTEN[name]
    assert (COMMITTED / name / "spec.tsv").read_text(encoding="utf-8") == spec_text(
        args["parallelism"], args["max_parallelism"]
    )
    lines = (COMMITTED / name / f"restored-{backend}.tsv").read_text(encoding="utf-8").splitlines()
    check_restored(lines, args["parallelism"], args["max_parallelism"])


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_a_flink_savepoint_read_writes_back_byte_for_byte(tmp_path: Path, name: str) -> None:
    """A savepoint read (ours, restored by Flink), written again as it is: the same files."""
    source = read_savepoint(str(COMMITTED / name / "savepoint"))
    write_savepoint(source, str(tmp_path / "sp"), inline_threshold=WRITTEN[name]["inline_threshold"])
    assert _files(tmp_path / "sp") == _files(COMMITTED / name / "savepoint")


def test_a_flink_savepoint_read_rescaled(tmp_path: Path) -> None:
    source = read_savepoint(str(COMMITTED / "inline" / "savepoint"))
    sp = write_savepoint(source, str(tmp_path / "sp"), parallelism=3, max_parallelism=512)
    assert {(o.parallelism, o.max_parallelism) for o in sp.operators} == {(3, 512)}
    assert read_rows(sp) == set(rows())
    assert operator_view(sp) == expected_operator_states(dict.fromkeys(WRITTEN["inline"]["parallelism"], 3))


def test_flinks_own_savepoint_written_back(tmp_path: Path) -> None:
    """Operator list, union and broadcast state of a savepoint Flink wrote (metadata version 6),
    written back with the operators' ids: every value equal (its keyed operator's Kryo state is
    carried as bytes: test_flink_passthrough)."""
    source = read_savepoint(str(FIXTURES / "heap_canonical"))
    everything = write_savepoint(source, str(tmp_path / "all"))
    assert {o.operator_id for o in everything.operators} == {o.operator_id for o in source.operators}
    ops = ["operator-states", "broadcast"]
    sp = write_savepoint(source, str(tmp_path / "sp"), operators=ops)
    for uid in ops:
        assert sp.operator(uid).operator_id == source.operator(uid).operator_id == operator_id_hex(uid)
        for info in source.operator_infos(uid):
            for sub in range(source.operator(uid).parallelism):
                want = source.operator_values(uid, info.name, sub)
                assert sp.operator_values(uid, info.name, sub) == want and want
