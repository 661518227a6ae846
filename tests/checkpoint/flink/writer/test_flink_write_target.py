"""Writing a Flink savepoint for a chosen Flink release (``flink_version``): the model checkpoint
read back for each release with every value; the operator state streams, keyed state headers
(every serializer snapshot) and Kryo bytes equal to what real Flink 1.17, 1.20 and 2.3 wrote
(the committed fixtures); Kryo states carried across Kryo majors re-encoded or refused; the
default release; refusals before any file is written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from flink_model import FIELDS_DDL, KEYS, VERSIONS, fields, fixture
from kryo_model import encode
from operator_views import expected_operator_states, operator_view
from write_model import build_checkpoint, model, read_rows, rows

from flinkstate.checkpoint import CompletedCheckpoint
from flinkstate.checkpoint.flink import (
    FlinkSavepoint,
    FlinkTarget,
    FlinkVersionRequiredError,
    UnsupportedFlinkWriteError,
    flink_target,
    read_savepoint,
    write_operators,
    write_savepoint,
)
from flinkstate.checkpoint.flink.metadata.operator_id import operator_id
from flinkstate.checkpoint.flink.streams.header_read import read_header
from flinkstate.checkpoint.flink.streams.header_write import VERBATIM
from flinkstate.checkpoint.flink.types import classes
from flinkstate.checkpoint.flink.types.declared_read import parse_type
from flinkstate.checkpoint.flink.wire.data_write import Output
from flinkstate.checkpoint.flink.writer.flink_source import row_outer_versions
from flinkstate.checkpoint.flink.writer.sources import OperatorSource
from flinkstate.state.errors import InvalidArgumentError
from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.operator import OperatorStateData, OperatorStateMode
from flinkstate.state.types.mapping import Types

TARGETS = ["1.13", "1.17", "1.20", "2.3"]
OPAQUE = "STRUCT<value: BIGINT NOT NULL>"
KRYO_TYPES = {"v_kryo": OPAQUE, "v_kryo_fields": FIELDS_DDL}
#: The releases each fixture's files allow, and the oldest of them (the default target): 1.15's
#: and 1.13's (metadata version 3, operator state format 5) allow 1.13-1.15 and our writer for 1.13-1.17.
DEFAULTS = {"2.3": (2, 3), "1.20": (1, 18), "1.17": (1, 16), "1.15": (1, 13), "1.13": (1, 13)}


@pytest.fixture(scope="module")
def model_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build_checkpoint(str(tmp_path_factory.mktemp("model") / "checkpoint"))


def streams(sp: FlinkSavepoint, kind: str) -> dict[tuple[str, int], bytes]:
    """Every subtask's ``kind`` (``keyed`` or ``operator``) state stream, by operator id and subtask."""
    out = {}
    for op in sp.operators:
        for sub in op.subtasks:
            handle = sub.managed_keyed if kind == "keyed" else sub.managed_operator
            if handle is not None and handle.stream is not None:
                out[(op.operator_id, sub.index)] = handle.stream.read(sp.directory, sp.storage)
    return out


def _row_snapshot(data: bytes) -> bytes:
    """The first Row serializer snapshot's version, magic, outer version, (row-kind flag,) nested magic."""
    name = classes.ROW.encode()
    at = data.index(name) + len(name)
    return data[at : at + 17]


@pytest.mark.parametrize("version", TARGETS)
def test_the_model_reads_back_for_each_release(
    model_checkpoint: CompletedCheckpoint, tmp_path: Path, version: str
) -> None:
    sp = write_savepoint(model_checkpoint, str(tmp_path / "sp"), flink_version=version, inline_threshold=0)
    back = sp.with_flink_version(version)
    assert read_rows(back) == set(rows())
    assert operator_view(back) == expected_operator_states(dict.fromkeys(model(), 2))
    target = FlinkTarget.of(version)
    assert {data[:4] for data in streams(sp, "operator").values()} == {target.operator_format.to_bytes(4)}
    assert {data[:4] for data in streams(sp, "keyed").values()} == {(6).to_bytes(4)}
    # our writer's _metadata (version 3) and operator format 5: 1.13-1.15 or ours; 6: ours only
    found = read_savepoint(str(tmp_path / "sp")).flink_versions
    if target.operator_format == 5:
        assert (found.describe(), found.kryo) == ("1.13-1.15 or flinkstate's writer for 1.13-1.17", 2)
    else:
        assert (found.describe(), found.kryo) == ("flinkstate's writer for 1.18-2.3", None)


@pytest.mark.parametrize("version", VERSIONS)
def test_operator_streams_are_the_bytes_flink_wrote(tmp_path: Path, version: str) -> None:
    """Operator list, union and broadcast state of a fixture written again for its own release:
    every subtask's stream (header version 5 without the compression flag for 1.13-1.17, 6 with
    it for 1.20 and 2.3; meta infos; elements) byte for byte what Flink wrote."""
    source = read_savepoint(str(fixture(version, "heap_canonical_files")))
    ops = ["operator-states", "broadcast"]
    sp = write_savepoint(
        source, str(tmp_path / "sp"), operators=ops, inline_threshold=0, flink_version=version
    )
    ours, flinks = streams(sp, "operator"), streams(source, "operator")
    assert ours and ours == {k: v for k, v in flinks.items() if k in ours}
    assert {v[:4] for v in ours.values()} == {(5 if version in ("1.17", "1.15", "1.13") else 6).to_bytes(4)}


@pytest.mark.parametrize("version", VERSIONS)
def test_keyed_headers_are_the_bytes_flink_wrote(tmp_path: Path, version: str) -> None:
    """Every keyed state's meta info and serializer snapshot (Row, POJO, Tuple, TTL, List, Map,
    atomic; the Kryo state carried) as Flink of that release wrote them."""
    source = read_savepoint(str(fixture(version, "heap_canonical_files")), types=KRYO_TYPES)
    sp = write_savepoint(source, str(tmp_path / "sp"), operators=["keyed-states"], inline_threshold=0,
                         flink_version=version)  # fmt: skip
    ours, flinks = streams(sp, "keyed"), streams(source, "keyed")
    assert len(ours) == 2
    for key, data in ours.items():
        end = read_header(data, "ours").end
        assert data[:end] == flinks[key][: read_header(flinks[key], "flink's").end]
        assert _row_snapshot(data) == _row_snapshot(flinks[key])


def test_a_row_snapshot_for_flink_1_13_is_version_3(tmp_path: Path) -> None:
    """1.13 refuses outer version 4; version 3 is Flink 1.17's snapshot without the row-kind flag."""
    source = read_savepoint(str(fixture("1.17", "heap_canonical_files")), types=KRYO_TYPES)
    flinks = next(iter(streams(source, "keyed").values()))
    sp = write_savepoint(source, str(tmp_path / "sp"), operators=["keyed-states"], flink_version="1.13")
    ours = next(iter(streams(sp, "keyed").values()))
    four = _row_snapshot(flinks)
    assert four[4:12] == classes.COMPOSITE_MAGIC.to_bytes(4) + (4).to_bytes(4) and four[12] == 1
    assert four[13:17] == classes.NESTED_MAGIC.to_bytes(4)
    # no flag: the nested snapshots' magic follows the outer version at once
    assert _row_snapshot(ours)[:16] == four[:8] + (3).to_bytes(4) + four[13:17]
    back = sp.with_flink_version("1.13")
    assert (
        back.keyed_state("keyed-states", "v_row").to_pylist()
        == source.keyed_state("keyed-states", "v_row").to_pylist()
    )


def _values(sp: FlinkSavepoint, state: str) -> dict[int, object]:
    return {r["key"]: r["value"] for r in sp.keyed_state("keyed-states", state).to_pylist()}


@pytest.mark.parametrize(("source_version", "target"), [("1.17", "2.3"), ("1.20", "2.3"), ("2.3", "1.20")])
def test_declared_kryo_states_are_re_encoded_across_kryo_majors(
    tmp_path: Path, source_version: str, target: str
) -> None:
    types = KRYO_TYPES
    source = read_savepoint(str(fixture(source_version, "heap_canonical")), types=types)
    write_savepoint(source, str(tmp_path / "sp"), operators=["keyed-states"], flink_version=target)
    back = read_savepoint(str(tmp_path / "sp"), types=types, flink_version=target)
    assert _values(back, "v_kryo") == {k: {"value": k} for k in KEYS} == _values(source, "v_kryo")
    assert _values(back, "v_kryo_fields") == _values(source, "v_kryo_fields")
    assert _values(back, "v_kryo_fields") == {k: pytest.approx(fields(k)) for k in KEYS}
    raw = _values(read_savepoint(str(tmp_path / "sp")), "v_kryo_fields")  # bytes, undeclared
    class_id = raw[0][0] - 2  # type: ignore[index]
    kryo = FlinkTarget.of(target).kryo
    assert raw == {k: encode(parse_type(FIELDS_DDL), _values(source, "v_kryo_fields")[k], class_id, kryo)
                   for k in KEYS}  # fmt: skip


@pytest.mark.parametrize("version", ["1.17", "1.20"])
def test_an_undeclared_kryo_state_of_another_major_is_refused(tmp_path: Path, version: str) -> None:
    source = read_savepoint(str(fixture(version, "heap_canonical")), types={"v_kryo": OPAQUE})
    with pytest.raises(
        UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\].*'v_kryo_fields'.*Kryo 2.*declare"
    ):
        write_savepoint(source, str(tmp_path / "sp"), flink_version="2.3")
    assert not (tmp_path / "sp").exists()
    # for a release of its own Kryo it is carried as it was
    write_savepoint(source, str(tmp_path / "same"), operators=["keyed-states"], flink_version="1.19")
    carried, raw = (
        read_savepoint(str(tmp_path / "same")),
        read_savepoint(str(fixture(version, "heap_canonical"))),
    )
    assert _values(carried, "v_kryo_fields") == _values(raw, "v_kryo_fields")


def test_reading_our_1x_kryo_state_needs_the_release(tmp_path: Path) -> None:
    """V3 _metadata does not tell which Kryo our writer wrote: the read asks for flink_version."""
    source = read_savepoint(str(fixture("1.17", "heap_canonical")), types=KRYO_TYPES)
    write_savepoint(source, str(tmp_path / "sp"), operators=["keyed-states"], flink_version="1.17")
    unnamed = read_savepoint(str(tmp_path / "sp"), types=KRYO_TYPES)
    with pytest.raises(FlinkVersionRequiredError, match=r"\[FLINK_VERSION_REQUIRED\].*v_kryo_fields"):
        unnamed.keyed_state("keyed-states", "v_kryo_fields")
    named = unnamed.with_flink_version("1.17")
    assert _values(named, "v_kryo_fields") == _values(source, "v_kryo_fields")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_flink_savepoint_is_written_for_its_own_releases_by_default(tmp_path: Path, version: str) -> None:
    source = read_savepoint(str(fixture(version, "heap_canonical")), types=KRYO_TYPES)
    assert flink_target(None, source) == FlinkTarget(DEFAULTS[version])
    assert flink_target("1.20.5", source) == FlinkTarget((1, 20))
    sp = write_savepoint(source, str(tmp_path / "sp"), operators=["operator-states"], inline_threshold=0)
    assert {v[:4] for v in streams(sp, "operator").values()} == {
        FlinkTarget(DEFAULTS[version]).operator_format.to_bytes(4)
    }


def test_our_checkpoints_are_written_for_the_newest(model_checkpoint: CompletedCheckpoint) -> None:
    assert flink_target(None, model_checkpoint) == FlinkTarget((2, 3)) == FlinkTarget()


@pytest.mark.parametrize("bad", ["1.12", "3.0", "2.4", "latest", "1"])
def test_an_unknown_release_is_refused(
    model_checkpoint: CompletedCheckpoint, tmp_path: Path, bad: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=r"\[INVALID_ARGUMENT\].*flink_version"):
        write_savepoint(model_checkpoint, str(tmp_path / "sp"), flink_version=bad)
    assert not (tmp_path / "sp").exists()


def test_pyflink_thread_mode_needs_flink_1_16(model_checkpoint: CompletedCheckpoint, tmp_path: Path) -> None:
    with pytest.raises(
        UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\] operator 'by-name'.*thread.*1\.16"
    ):
        write_savepoint(model_checkpoint, str(tmp_path / "sp"), operators=["by-name"], pyflink_mode="thread",
                        flink_version="1.15")  # fmt: skip
    assert not (tmp_path / "sp").exists()
    for mode, version in (("process", "1.15"), ("thread", "1.16")):
        write_savepoint(model_checkpoint, str(tmp_path / mode), operators=["by-name"], pyflink_mode=mode,
                        flink_version=version)  # fmt: skip


class _RowOfKryo(OperatorSource):
    """An operator list state of Row<Kryo class> values with Flink's meta info (Row snapshot of
    outer version 4, as 1.14+ write it): carried as bytes, as the writer cannot encode Kryo."""

    def __init__(self) -> None:
        self.name, self.operator_id = "row-of-kryo", operator_id("row-of-kryo")
        self.parallelism, self.max_parallelism = 1, 128
        self.key_type, self.states = None, ()

    def keyed_columns(self, index: int) -> Iterator[tuple[int, StateColumns]]:
        return iter(())

    def operator_states(self) -> list[list[OperatorStateData]]:
        meta = Output("meta")
        meta.utf("rows", "name")
        for n in (1, 1):  # backend type OPERATOR, one option
            meta.i32(n, "int")
        for text in ("OPERATOR_STATE_DISTRIBUTION_MODE", "SPLIT_DISTRIBUTE"):
            meta.utf(text, "option")
        meta.i32(1, "serializer count")
        meta.utf("VALUE_SERIALIZER", "serializer key")
        meta.i32(2, "top level")
        meta.utf(classes.ROW, "class")
        for n in (3, classes.COMPOSITE_MAGIC, 4):
            meta.i32(n, "int")
        meta.boolean(True)
        for n in (classes.NESTED_MAGIC, 1, 1):
            meta.i32(n, "int")
        meta.utf(classes.KRYO, "class")
        meta.i32(2, "version")
        meta.utf("FixtureJob$Opaque", "Kryo class")
        for _ in range(3):
            meta.i64(classes.OPTIONAL_MAP_HEADER, "optional map")
            meta.i32(0, "size")
        elements = [b"\x00" + encode(pa.struct([("value", pa.int64())]), {"value": 7})]
        bytes_type = Types.PRIMITIVE_ARRAY(Types.BYTE())
        mode = OperatorStateMode.SPLIT_DISTRIBUTE
        return [[OperatorStateData("rows", mode, bytes_type, elements, None, {VERBATIM: bytes(meta.buf)})]]


def test_a_carried_row_snapshot_of_version_4_is_refused_for_flink_1_13(tmp_path: Path) -> None:
    write_operators([_RowOfKryo()], str(tmp_path / "source"), 1)
    source = read_savepoint(str(tmp_path / "source"), flink_version="2.3")
    info = source.operator_infos("row-of-kryo")[0]
    assert row_outer_versions(info.meta) == {4}
    with pytest.raises(
        UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\].*'rows'.*outer version 4.*1\.13"
    ):
        write_savepoint(source, str(tmp_path / "old"), flink_version="1.13")
    assert not (tmp_path / "old").exists()
    again = write_savepoint(source, str(tmp_path / "again"), flink_version="2.3")
    assert streams(again, "operator") == streams(source, "operator")  # carried for 1.14+, as it was


def test_a_flink_savepoints_thread_mode_state_needs_flink_1_16(
    model_checkpoint: CompletedCheckpoint, tmp_path: Path
) -> None:
    """PyFlink thread-mode state carried from a Flink savepoint: refused for a release before
    1.16; with operator state of format 5 (1.13-1.17), the default release is 1.16, not the 1.13
    that version-3 metadata and format 5 alone give (and still give for process mode)."""
    for mode, version in (("thread", "1.16"), ("process", "1.13")):
        write_savepoint(model_checkpoint, str(tmp_path / mode), pyflink_mode={"by-name": mode},
                        flink_version=version)  # fmt: skip
    thread, process = (read_savepoint(str(tmp_path / m)) for m in ("thread", "process"))
    for sp in (thread, process):
        assert sp.flink_versions.releases == ((1, 13), (1, 14), (1, 15))
        assert sp.flink_versions.written_for == tuple((1, m) for m in range(13, 18))
    assert flink_target(None, thread) == FlinkTarget((1, 16))
    assert flink_target(None, process) == FlinkTarget((1, 13))
    for version in ("1.13", "1.15"):
        with pytest.raises(
            UnsupportedFlinkWriteError,
            match=rf"\[FLINK_UNSUPPORTED\] operator '{operator_id('by-name').hex()}' is keyed by "
            r"PyFlink's Row.*thread mode.*1\.16",
        ):  # version-3 metadata holds no uid: the operator is named by its id
            write_savepoint(thread, str(tmp_path / f"again-{version}"), flink_version=version)
        assert not (tmp_path / f"again-{version}").exists()
    again = write_savepoint(thread, str(tmp_path / "again"))
    assert flink_target(None, again) == FlinkTarget((1, 16))
    by_name = thread.keyed_header(thread.operator("by-name").operator_id)
    assert by_name is not None and not any(s.name.startswith("python-state-") for s in by_name.states)
    compared = 0
    for op in thread.operators:
        header = thread.keyed_header(op.operator_id)
        for name in [s.name for s in header.states if not s.is_timer] if header is not None else []:
            got = again.keyed_state(op.operator_id, name).to_pylist()
            assert repr(got) == repr(thread.keyed_state(op.operator_id, name).to_pylist())  # NaN too
            compared += len(got)
    assert compared > 100
    write_savepoint(process, str(tmp_path / "process-1.13"), flink_version="1.13")
