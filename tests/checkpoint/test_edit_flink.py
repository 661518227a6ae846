"""Offline edits of Flink savepoints and the conversion of Flink savepoints to ours: an edited
Flink savepoint read back by our reader equals the model edited by hand, and equals editing
our savepoint then writing it for Flink; a Flink savepoint converted to ours and back holds
the same state; bad edits are refused with their codes before any file is written."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from edit_model import CASES, Model, build, dump, dump_flink, model

from flinkstate.checkpoint import (
    CheckpointError,
    CompletedCheckpoint,
    EditError,
    SavepointEdits,
    edit_checkpoint,
    open_checkpoint,
)
from flinkstate.checkpoint.flink import (
    FlinkSavepoint,
    UnsupportedFlinkWriteError,
    edit_savepoint,
    import_savepoint,
    operator_id_hex,
    plan_savepoint_edits,
    read_savepoint,
    write_savepoint,
)
from flinkstate.state import StateTtlConfig, Types

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink"


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build(str(tmp_path_factory.mktemp("edit-flink") / "ours"))


@pytest.fixture(scope="module")
def flink(ours: CompletedCheckpoint, tmp_path_factory: pytest.TempPathFactory) -> FlinkSavepoint:
    """The model as a Flink savepoint (metadata version 3: operators known by their uid's hash)."""
    return write_savepoint(ours, str(tmp_path_factory.mktemp("edit-flink") / "flink"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_edited_flink_savepoint_is_the_model_edited(
    ours: CompletedCheckpoint, flink: FlinkSavepoint, tmp_path: Path, case: str
) -> None:
    edits, change = CASES[case]
    edited = edit_savepoint(flink, str(tmp_path / "edited"), edits)
    want: Model = model()
    change(want)
    want = {uid: states for uid, states in want.items() if states}  # an operator without state goes
    assert dump_flink(edited, sorted(want)) == want
    assert {op.operator_id for op in edited.operators} == {operator_id_hex(uid) for uid in want}
    for op in edited.operators:
        assert op.max_parallelism == (edits.max_parallelism or flink.operators[0].max_parallelism)
    # the same edit of our savepoint, written for Flink, holds the same state
    via_ours = write_savepoint(edit_checkpoint(ours, str(tmp_path / "ours"), edits), str(tmp_path / "f2"))
    assert dump_flink(via_ours, sorted(want)) == want


def test_flink_savepoint_to_ours_and_back(flink: FlinkSavepoint, tmp_path: Path) -> None:
    back = import_savepoint(flink, str(tmp_path / "ours"), uids=["counter", "other", "source"])
    assert dump(back) == model()
    assert back.manifest.operator("counter") is not None and back.manifest.kind == "savepoint"
    again = write_savepoint(back, str(tmp_path / "flink"))
    assert dump_flink(again, ["counter", "other", "source"]) == model()


def test_a_removed_operator_is_never_read(tmp_path: Path) -> None:
    """Flink's own savepoint: operators removed are not written, the rest is written again and
    read back equal; an operator the writer cannot write can be removed (it is never read)."""
    source = read_savepoint(str(FIXTURES / "heap_canonical"))
    edits = SavepointEdits().remove_operator("keyed-states").remove_operator("window-sum")
    edits = edits.rename_operator("broadcast", "broadcast-v2")
    out = edit_savepoint(source, str(tmp_path / "out"), edits)
    assert {op.operator_id for op in out.operators} == {
        operator_id_hex("operator-states"),
        operator_id_hex("broadcast-v2"),
    }
    for old, new in (("operator-states", "operator-states"), ("broadcast", "broadcast-v2")):
        names = sorted(s.name for s in source.states() if s.operator_id == source.operator(old).operator_id)
        for name in names:
            assert out.state(new, name).to_pylist() == source.state(old, name).to_pylist()
    # a heap checkpoint's Kryo state can be neither written nor carried: its operator is refused
    # unless removed
    checkpoint = read_savepoint(str(FIXTURES / "heap_checkpoint"))
    with pytest.raises(UnsupportedFlinkWriteError, match="'v_kryo'"):
        edit_savepoint(checkpoint, str(tmp_path / "no"), SavepointEdits().remove_operator("window-sum"))
    assert not (tmp_path / "no").exists()
    kept = edit_savepoint(checkpoint, str(tmp_path / "ok"), SavepointEdits().remove_operator("keyed-states"))
    assert operator_id_hex("keyed-states") not in {op.operator_id for op in kept.operators}


def test_real_flink_operators_converted_to_ours(tmp_path: Path) -> None:
    source = read_savepoint(str(FIXTURES / "heap_canonical"))
    ours = import_savepoint(source, str(tmp_path / "ours"), operators=["operator-states", "broadcast"])
    assert sorted(op.uid for op in ours.manifest.operators) == ["broadcast", "operator-states"]
    for uid in ("operator-states", "broadcast"):
        flink_states = {s.name for s in source.states() if s.operator_id == source.operator(uid).operator_id}
        op = ours.manifest.operator(uid)
        assert op is not None and {i.name for i in op.operator_states} == flink_states
        for index in range(op.parallelism):
            want = source.operator_backend(uid, index, op.parallelism).snapshot()
            got = ours.operator_backend(uid, index, op.parallelism).snapshot()
            assert sorted((d.name, repr(d.elements)) for d in got) == sorted(
                (d.name, repr(d.elements)) for d in want
            )
    # a TTL state is refused before any file, even after an operator that converts
    with pytest.raises(UnsupportedFlinkWriteError, match="'keyed-states', state 'ttl_"):
        import_savepoint(source, str(tmp_path / "ttl"), operators=["window-sum", "keyed-states"])
    assert not (tmp_path / "ttl").exists()


def test_dry_run_names_operators_by_the_uids_given(flink: FlinkSavepoint) -> None:
    edits = SavepointEdits().rename_operator("counter", "cnt").remove_state("counter", "events")
    got = [
        (c.action, c.operator, c.state, c.before, c.after) for c in plan_savepoint_edits(flink, edits).changes
    ]
    assert got == [
        ("rename operator", "counter", "", "counter", "cnt"),
        ("remove state", "counter", "events", "", ""),
    ]
    by_id = SavepointEdits().remove_operator(operator_id_hex("other"))
    assert [c.operator for c in plan_savepoint_edits(flink, by_id).changes] == [operator_id_hex("other")]


BAD: dict[str, tuple[Callable[[], SavepointEdits], str]] = {
    "unknown operator": (lambda: SavepointEdits().rename_operator("nope", "x"), "UNKNOWN_OPERATOR"),
    "unknown state": (lambda: SavepointEdits().remove_state("source", "count"), "UNKNOWN_STATE"),
    "rename collision": (lambda: SavepointEdits().rename_operator("counter", "source"), "UID_COLLISION"),
    "max parallelism below parallelism": (
        lambda: SavepointEdits().with_max_parallelism(1),
        "INVALID_PARALLELISM",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_edits_refused(flink: FlinkSavepoint, tmp_path: Path, case: str) -> None:
    make, code = BAD[case]
    with pytest.raises(EditError) as info:
        edit_savepoint(flink, str(tmp_path / "out"), make())
    assert info.value.code == code and str(info.value).startswith(f"[{code}]")
    assert not (tmp_path / "out").exists()


def test_each_edit_function_takes_its_own_format(
    ours: CompletedCheckpoint, flink: FlinkSavepoint, tmp_path: Path
) -> None:
    edits = SavepointEdits().remove_operator("other")
    with pytest.raises(CheckpointError, match=r"^\[UNSUPPORTED_FORMAT\]"):
        edit_checkpoint(flink, str(tmp_path / "a"), edits)  # type: ignore[arg-type]
    with pytest.raises(CheckpointError, match=r"^\[UNSUPPORTED_FORMAT\]"):
        edit_savepoint(ours, str(tmp_path / "b"), edits)  # type: ignore[arg-type]
    assert isinstance(open_checkpoint(flink.directory), FlinkSavepoint)


def test_a_ttl_state_is_refused_by_the_conversion(flink: FlinkSavepoint, tmp_path: Path) -> None:
    """A Flink TTL state holds no TTL duration of ours: refused, naming it, until removed."""
    ttl = StateTtlConfig.new_builder(timedelta(hours=1)).build()
    rows = [{"key": "a", "value": 1}]
    with_ttl = edit_savepoint(
        flink, str(tmp_path / "ttl"), SavepointEdits().set_keyed_state("other", "t", rows, ttl=ttl)
    )
    with pytest.raises(
        UnsupportedFlinkWriteError, match=r"^\[FLINK_UNSUPPORTED\] operator 'other', state 't'"
    ):
        import_savepoint(with_ttl, str(tmp_path / "ours"), uids=["other"])
    assert not (tmp_path / "ours" / "_metadata").exists()
    removed = edit_savepoint(with_ttl, str(tmp_path / "without"), SavepointEdits().remove_state("other", "t"))
    assert (
        dump(import_savepoint(removed, str(tmp_path / "ours2"), uids=["counter", "other", "source"]))
        == model()
    )


def test_a_type_flink_cannot_take_is_refused(flink: FlinkSavepoint, tmp_path: Path) -> None:
    rows = [{"key": "a", "value": b"x"}]
    edits = SavepointEdits().set_keyed_state("counter", "blob", rows, value_type=Types.PICKLED_BYTE_ARRAY())
    with pytest.raises(UnsupportedFlinkWriteError, match=r"^\[FLINK_UNSUPPORTED\] .*'blob'"):
        edit_savepoint(flink, str(tmp_path / "out"), edits)
    assert not (tmp_path / "out").exists()


def test_the_dry_run_checks_what_cannot_be_written(flink: FlinkSavepoint) -> None:
    rows = [{"key": "a", "value": b"x"}]
    edits = SavepointEdits().set_keyed_state("counter", "blob", rows, value_type=Types.PICKLED_BYTE_ARRAY())
    with pytest.raises(UnsupportedFlinkWriteError, match="'blob'"):
        plan_savepoint_edits(flink, edits)
