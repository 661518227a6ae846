"""``--flink-version`` of ``flinkstate convert --to flink`` and ``flinkstate edit``: the savepoint
written for that Flink release (operator state format 5 for 1.13-1.17, 6 after), every value read
back; a Flink 1.x savepoint written for its own releases by default; misuse refused."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Job, Run, model

from flinkstate.checkpoint.flink import FlinkSavepoint, read_savepoint

FIXTURE_117 = Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "1.17" / "heap_canonical"
OPERATOR_OPS = ["--operator", "operator-states", "--operator", "broadcast"]


def operator_formats(sp: FlinkSavepoint) -> set[int]:
    """The format versions of the savepoint's operator state streams."""
    found = set()
    for op in sp.operators:
        for sub in op.subtasks:
            handle = sub.managed_operator
            if handle is not None and handle.stream is not None:
                found.add(int.from_bytes(handle.stream.read(sp.directory, sp.storage, 4)))
    return found


def operator_values(sp: FlinkSavepoint) -> dict[tuple[str, str, int], object]:
    return {
        (op.operator_id, info.name, sub): sp.operator_values(op.operator_id, info.name, sub)
        for op in sp.operators
        for info in sp.operator_infos(op.operator_id)
        for sub in range(op.parallelism)
    }


def test_convert_our_checkpoint_for_flink_1_17(local_job: Job, run: Run, tmp_path: Path) -> None:
    target = tmp_path / "flink"
    ops = ["--operator", "counter", "--operator", "source"]
    run("convert", local_job.root, str(target), "--to", "flink", *ops, "--flink-version", "1.17.2")
    sp = read_savepoint(str(target), flink_version="1.17")
    assert operator_formats(sp) == {5}
    assert {r["key"]: r["value"] for r in sp.keyed_state("counter", "count").to_pylist()} == model(3)["count"]
    newest = tmp_path / "newest"
    run("convert", local_job.root, str(newest), "--to", "flink", *ops)
    assert operator_formats(read_savepoint(str(newest))) == {6}
    assert operator_values(read_savepoint(str(newest))) == operator_values(sp)


def test_a_flink_1_17_savepoint_stays_restorable_by_its_flink(run: Run, tmp_path: Path) -> None:
    source = read_savepoint(str(FIXTURE_117))
    kept, moved = tmp_path / "kept", tmp_path / "moved"
    run("convert", str(FIXTURE_117), str(kept), "--to", "flink", *OPERATOR_OPS)
    run("convert", str(FIXTURE_117), str(moved), "--to", "flink", *OPERATOR_OPS, "--flink-version", "2.3")
    assert operator_formats(source) == operator_formats(read_savepoint(str(kept))) == {5}
    assert operator_formats(read_savepoint(str(moved))) == {6}
    want = {
        k: v for k, v in operator_values(source).items() if k in operator_values(read_savepoint(str(kept)))
    }
    assert operator_values(read_savepoint(str(kept))) == operator_values(read_savepoint(str(moved))) == want


def test_edit_a_flink_1_17_savepoint(run: Run, tmp_path: Path) -> None:
    subset = tmp_path / "subset"
    run("convert", str(FIXTURE_117), str(subset), "--to", "flink", *OPERATOR_OPS)
    edited, newer = tmp_path / "edited", tmp_path / "newer"
    doc = json.loads(run("edit", str(subset), str(edited), "--remove-state", "operator-states/op_union",
                         "--json").stdout)  # fmt: skip
    assert doc["format"] == "flink"
    assert operator_formats(read_savepoint(str(edited))) == {5}
    run(
        "edit",
        str(subset),
        str(newer),
        "--remove-state",
        "operator-states/op_union",
        "--flink-version",
        "1.20",
    )
    assert operator_formats(read_savepoint(str(newer))) == {6}
    for sp in (read_savepoint(str(edited)), read_savepoint(str(newer))):
        assert {i.name for i in sp.operator_infos("operator-states")} == {"op_list"}
        assert operator_values(sp) == {
            k: v for k, v in operator_values(read_savepoint(str(subset))).items() if k[1] != "op_union"
        }


def test_misuse_is_refused(local_job: Job, run: Run, tmp_path: Path) -> None:
    target = tmp_path / "out"
    bad = run("convert", local_job.root, str(target), "--to", "flink", "--flink-version", "1.12", code=3)
    assert bad.stderr.startswith("[INVALID_ARGUMENT]") and "1.12" in bad.stderr
    ours = run(
        "convert", str(FIXTURE_117), str(target), "--to", "flinkstate", "--flink-version", "1.17", code=3
    )
    assert ours.stderr.startswith("[INVALID_OPTION] --flink-version applies to --to flink only")
    edits = ["--remove-state", "counter/events", "--flink-version", "1.17"]
    edit = run("edit", local_job.root, str(target), *edits, code=3)
    assert edit.stderr.startswith("[INVALID_OPTION] --flink-version applies to a Flink savepoint")
    assert not target.exists()
