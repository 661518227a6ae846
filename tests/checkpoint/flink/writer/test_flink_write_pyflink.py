"""write_savepoint(..., pyflink_mode=...): PyFlink Python state our reader reads back as the
model (the ``flink`` tier restores the same savepoints in PyFlink: test_flink_write_restore_pyflink.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from flink_model import FIXTURES
from pyflink_write_model import LAYOUT, build_checkpoint, expected_lines, modes, read_back, spec

from flinkstate.checkpoint import open_checkpoint
from flinkstate.checkpoint.flink import read_savepoint, write_savepoint
from flinkstate.checkpoint.flink.writer.pyflink import row_key_group
from flinkstate.state.errors import FlinkStateError
from flinkstate.state.types.mapping import Types

MODES = sorted(LAYOUT)


@pytest.fixture(scope="module", params=MODES)
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    mode = request.param
    work = tmp_path_factory.mktemp(f"pyflink-{mode}")
    source = build_checkpoint(str(work / "checkpoint"), mode)
    layout = LAYOUT[mode]
    target = work / "savepoint"
    write_savepoint(
        source, str(target), pyflink_mode=modes(mode), parallelism=layout["parallelism"],
        max_parallelism=layout["max_parallelism"],
    )  # fmt: skip
    return mode, target


def test_our_reader_reads_back_every_value_in_its_key_group(written: tuple[str, Path]) -> None:
    mode, target = written
    assert read_back(read_savepoint(str(target)), mode) == expected_lines(mode)


def test_states_are_kept_as_each_mode_keeps_them(written: tuple[str, Path]) -> None:
    mode, target = written
    states = {s.name: s for s in read_savepoint(str(target)).states()}  # names are unique
    assert {s.key_type for s in states.values()} == {
        "ROW<f0 LONG>",
        "ROW<f0 STRING>",
        "ROW<f0 PRIMITIVE_ARRAY<BYTE>>",
    }
    if mode == "process":
        assert all(name.startswith("python-state-") for name in states)
        m = states["python-state-m_str"]
        assert (m.kind, m.user_key_type, m.value_type) == (
            "MAP",
            "PRIMITIVE_ARRAY<BYTE>",
            "PRIMITIVE_ARRAY<BYTE>",
        )
        assert states["python-state-r_sum"].kind == "LIST"
        assert states["python-state-t_value"].ttl
    else:
        assert states["v_int"].value_type == "LONG"  # PyFlink keeps INT as a Java Long
        assert states["v_float"].value_type == "DOUBLE"
        assert states["v_pickled"].value_type == "PRIMITIVE_ARRAY<BYTE>"
        assert states["m_int"].user_key_type == "LONG"
        assert (states["r_sum"].kind, states["a_acc"].kind) == ("VALUE", "VALUE")
        assert states["t_map"].ttl


def test_row_key_groups_are_flinks() -> None:
    """The key groups Flink 2.3 gave PyFlink's Row keys in the PyFlink fixture."""
    sp = read_savepoint(str(FIXTURES / "pyflink"))
    rows = sp.python_state("py-states", "py_long", Types.LONG()).to_pylist()
    assert len(rows) == 10
    for r in rows:
        assert r["key_group"] == row_key_group((r["key"],), Types.LONG(), 128)


def test_a_pyflink_savepoint_written_back_holds_the_same_state(tmp_path: Path) -> None:
    source = read_savepoint(str(FIXTURES / "pyflink"))
    written = write_savepoint(source, str(tmp_path / "sp"), max_parallelism=256, parallelism=2)
    assert {s.name for s in written.states()} == {s.name for s in source.states() if "timer" not in s.name}
    row = Types.ROW_NAMED(["a", "b", "c"], [Types.LONG(), Types.STRING(), Types.DOUBLE()])
    declared = [
        ("py_long", Types.LONG(), "value", None),
        ("py_string", Types.STRING(), "value", None),
        ("py_pickled", Types.PICKLED_BYTE_ARRAY(), "value", None),
        ("py_row", row, "value", None),
        ("py_list", Types.LONG(), "list", None),
        ("py_map", Types.LONG(), "map", Types.STRING()),
    ]
    for name, value_type, kind, user_key in declared:
        before, after = (
            {
                (r["key"], r.get("position"), r.get("user_key"), str(r["value"]))
                for r in sp.python_state(
                    "py-states", name, value_type, kind, user_key, allow_pickle=True
                ).to_pylist()
            }
            for sp in (source, written)
        )
        assert before == after and len(before) >= 10, name
    for r in written.python_state("py-states", "py_long", Types.LONG()).to_pylist():
        assert r["key_group"] == row_key_group((r["key"],), Types.LONG(), 256)


def test_pickles_need_allow_pickle_on_the_checkpoint(tmp_path: Path) -> None:
    build_checkpoint(str(tmp_path / "checkpoint"), "process")
    guarded = open_checkpoint(str(tmp_path / "checkpoint"))
    with pytest.raises(FlinkStateError, match=r"\[PICKLE_NOT_ALLOWED\]"):
        write_savepoint(guarded, str(tmp_path / "sp"), pyflink_mode="process")
    assert not (tmp_path / "sp" / "_metadata").exists()


def test_what_a_mode_cannot_keep_is_refused_before_writing(tmp_path: Path) -> None:
    source = build_checkpoint(str(tmp_path / "checkpoint"), "process")
    with pytest.raises(FlinkStateError, match=r"\[FLINK_UNSUPPORTED\].*'v_row'.*thread-mode"):
        write_savepoint(source, str(tmp_path / "thread"), pyflink_mode="thread")
    with pytest.raises(FlinkStateError, match=r"\[FLINK_UNSUPPORTED\].*pyflink_mode must be one of"):
        write_savepoint(source, str(tmp_path / "bad"), pyflink_mode={"py-values": "beam"})
    with pytest.raises(FlinkStateError, match=r"\[FLINK_UNSUPPORTED\].*PICKLED_BYTE_ARRAY"):
        write_savepoint(source, str(tmp_path / "plain"))  # not PyFlink: pickles have no Java type
    flink = read_savepoint(str(FIXTURES / "pyflink"))
    with pytest.raises(FlinkStateError, match=r"\[FLINK_UNSUPPORTED\].*keeps the mode"):
        write_savepoint(flink, str(tmp_path / "converted"), pyflink_mode="thread")
    assert not any(tmp_path.glob("*/_metadata"))


def test_one_mode_per_operator(tmp_path: Path) -> None:
    """A mapping names the PyFlink operators; the others are written as Java state."""
    source = build_checkpoint(str(tmp_path / "checkpoint"), "thread")
    written = write_savepoint(
        source,
        str(tmp_path / "sp"),
        operators=["py-names", "py-values"],
        pyflink_mode={"py-names": "process", "py-values": "thread"},
    )
    names = {s.name for s in written.states()}
    assert {"python-state-v_len", "python-state-l_str", "v_long"} <= names
    assert not {"v_len", "python-state-v_long"} & names


COMMITTED = FIXTURES / "written"


@pytest.mark.parametrize("mode", MODES)
def test_writer_still_writes_the_committed_pyflink_savepoint(tmp_path: Path, mode: str) -> None:
    """written/pyflink-<mode> (generate_written_pyflink.py): PyFlink 2.3 restored these files."""
    source = build_checkpoint(str(tmp_path / "checkpoint"), mode)
    layout = LAYOUT[mode]
    write_savepoint(
        source, str(tmp_path / "sp"), pyflink_mode=modes(mode), parallelism=layout["parallelism"],
        max_parallelism=layout["max_parallelism"],
    )  # fmt: skip
    committed = COMMITTED / f"pyflink-{mode}"
    files = {p.name: p.read_bytes() for p in sorted((tmp_path / "sp").iterdir())}
    assert files == {p.name: p.read_bytes() for p in sorted((committed / "savepoint").iterdir())}
    assert (committed / "spec.json").read_text(encoding="utf-8") == spec(mode)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("mode", MODES)
def test_what_pyflink_restored(mode: str, backend: str) -> None:
    printed = (COMMITTED / f"pyflink-{mode}" / f"restored-{backend}.txt").read_text(encoding="utf-8")
    assert printed.splitlines() == expected_lines(mode)


@pytest.mark.parametrize("mode", MODES)
def test_a_pyflink_savepoint_read_writes_back_byte_for_byte(tmp_path: Path, mode: str) -> None:
    """written/pyflink-<mode> (restored by PyFlink) read and written again as it is: the same files,
    each mode kept (a Flink savepoint's PyFlink operators are recognised by their Row key)."""
    committed = COMMITTED / f"pyflink-{mode}" / "savepoint"
    # written for 2.3 (V3 _metadata without operator state reads as 1.13-1.15 or ours: the
    # default would be 1.13, whose Row key snapshot is version 3)
    write_savepoint(read_savepoint(str(committed)), str(tmp_path / "sp"), flink_version="2.3")
    files = {p.name: p.read_bytes() for p in sorted((tmp_path / "sp").iterdir())}
    assert files == {p.name: p.read_bytes() for p in sorted(committed.iterdir())}
