"""Pass-through: states of a Flink savepoint whose serializers the writer cannot encode (Kryo,
SQL RowData) written back unchanged, their meta info and value bytes carried verbatim.

The model is the source read with our reader (declared Kryo types decoding the Kryo states):
the written savepoint, read the same way, holds every state equal, and each carried state's
bytes (key bytes after the key-group prefix, value bytes) equal to the source's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from flink_model import FIXTURES
from kryo_model import encode
from sql_model import RICH_DDL

from flinkstate.checkpoint import SavepointEdits
from flinkstate.checkpoint.flink import (
    FlinkSavepoint,
    FlinkTarget,
    UnsupportedFlinkWriteError,
    edit_savepoint,
    import_savepoint,
    operator_id_hex,
    read_savepoint,
    write_operators,
    write_savepoint,
)
from flinkstate.checkpoint.flink.metadata.operator_id import operator_id
from flinkstate.checkpoint.flink.reader.raw_entries import operator_elements
from flinkstate.checkpoint.flink.streams.header_write import VERBATIM
from flinkstate.checkpoint.flink.types.key_hash import flink_key_group_assigner
from flinkstate.checkpoint.flink.types.snapshots_write import ATOMIC_CLASSES, Snapshot
from flinkstate.checkpoint.flink.wire.data_write import Output
from flinkstate.checkpoint.flink.writer.savepoint import operators_of
from flinkstate.checkpoint.flink.writer.sources import OperatorSource
from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.operator import OperatorStateData, OperatorStateMode
from flinkstate.state.types.mapping import Types

OPAQUE = "STRUCT<value: BIGINT NOT NULL>"  # FixtureJob's Kryo class, declared
_TIMERS = ["_timer_state/processing_user-timers", "_timer_state/event_user-timers"]
#: Per fixture: the declared Kryo types, and the keyed states carried verbatim.
CASES: dict[str, tuple[dict[str, str], set[tuple[str, str]]]] = {
    name: ({"v_kryo": OPAQUE}, {("keyed-states", "v_kryo"), ("keyed-states", "v_kryo_fields")})
    for name in (
        "heap_canonical",
        "heap_canonical_files",
        "rocksdb_canonical",
        "heap_snappy",
        "rocksdb_native",
        "rocksdb_checkpoint",
    )
}
for _sql in ("sql_heap", "sql_rocksdb"):
    CASES[_sql] = (
        {"k_rich": RICH_DDL},
        {("kryo-states", "k_rich")}
        # RowData keys: every state of the operator is carried, timers too
        | {("4_deduplicate", s) for s in ["deduplicate-state", *_TIMERS]}
        | {("10_group-aggregate", s) for s in ["accState", *_TIMERS]},
    )


def _key(value: Any) -> str:
    return repr(value)


def keyed_tables(sp: FlinkSavepoint, with_key_group: bool = True) -> dict[tuple[str, str], list[str]]:
    """Every keyed state's rows, sorted (by operator id and state: our writer records no uids)."""
    out = {}
    for op in sp.operators:
        header = sp.keyed_header(op.operator_id)
        for info in header.states if header is not None else ():
            if info.is_timer:
                continue
            rows = sp.keyed_state(op.operator_id, info.name).to_pylist()
            if not with_key_group:
                for r in rows:
                    del r["key_group"]
            out[(op.operator_id, info.name)] = sorted(map(_key, rows))
    return out


def raw_entries(
    sp: FlinkSavepoint, op: str, state: str, with_key_group: bool = True
) -> list[tuple[Any, ...]]:
    """A keyed state's (or timer queue's) entries as bytes: (key group,) key bytes after the
    key-group prefix, value bytes."""
    timers = state.startswith("_timer_state/")
    rows = sp.raw_keyed(op, state, timers)
    found = [
        (kg, k, v) if with_key_group else (k, v)
        for r in rows
        for kg, k, v in zip(r.key_group, r.key, r.value, strict=True)
    ]
    return sorted(found)


def operator_values(sp: FlinkSavepoint) -> dict[tuple[str, str, int], Any]:
    out = {}
    for op in sp.operators:
        for info in sp.operator_infos(op.operator_id):
            for sub in range(op.parallelism):
                out[(op.operator_id, info.name, sub)] = sp.operator_values(op.operator_id, info.name, sub)
    return out


def carried(sp: FlinkSavepoint) -> set[tuple[str, str]]:
    """The keyed states the writer carries verbatim (by operator uid and state)."""
    return {
        (op.name, s.name)
        for op in operators_of(sp, None, FlinkTarget())
        for s in op.states
        if s.verbatim is not None
    }


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_written_back_as_it_was(tmp_path: Path, fixture: str) -> None:
    types, verbatim = CASES[fixture]
    source = read_savepoint(str(FIXTURES / fixture), types=types)
    assert carried(source) == verbatim
    written = write_savepoint(source, str(tmp_path / "sp"))
    # Our writer's _metadata (version 3) does not tell which Flink's Kryo bytes it carries: 2.3's.
    back = read_savepoint(str(tmp_path / "sp"), types=types, flink_version="2.3")
    assert [(o.operator_id, o.parallelism, o.max_parallelism) for o in written.operators] == [
        (o.operator_id, o.parallelism, o.max_parallelism) for o in source.operators
    ]
    assert keyed_tables(back) == keyed_tables(source)
    for op, state in verbatim:
        assert raw_entries(back, op, state) == raw_entries(source, op, state)
        assert raw_entries(source, op, state) or state in _TIMERS
    assert operator_values(back) == operator_values(source)
    unnamed = {"operator_uid": "", "operator_name": ""}  # our writer records neither
    assert [{**s.__dict__, **unnamed} for s in back.states()] == [
        {**s.__dict__, **unnamed} for s in source.states()
    ]


@pytest.mark.parametrize("fixture", ["heap_canonical", "rocksdb_canonical", "heap_snappy"])
def test_rescaled_where_keys_are_readable(tmp_path: Path, fixture: str) -> None:
    """A new max parallelism and parallelism: the Kryo state's entries go to the key groups of
    their keys at the new max parallelism, bytes unchanged; values decode the same."""
    types, verbatim = CASES[fixture]
    source = read_savepoint(str(FIXTURES / fixture), types=types)
    ops = ["keyed-states", "operator-states"]
    write_savepoint(source, str(tmp_path / "sp"), operators=ops, parallelism=3, max_parallelism=300)
    back = read_savepoint(str(tmp_path / "sp"), types=types, flink_version="2.3")
    assert {(o.parallelism, o.max_parallelism) for o in back.operators} == {(3, 300)}
    ids = {operator_id_hex(uid) for uid in ops}
    want = {k: v for k, v in keyed_tables(source, False).items() if k[0] in ids}
    assert keyed_tables(back, False) == want
    assign = flink_key_group_assigner(source.keyed_header("keyed-states").key.type_info)  # type: ignore[union-attr]
    for op, state in verbatim:
        assert raw_entries(back, op, state, False) == raw_entries(source, op, state, False)
        for row in back.keyed_state(op, state).to_pylist():
            assert row["key_group"] == assign(row["key"], 300)


@pytest.mark.parametrize("fixture", ["heap_canonical", "sql_heap"])
def test_renamed_by_an_edit(tmp_path: Path, fixture: str) -> None:
    """An operator holding carried states renamed (and one of its other states removed)."""
    types, verbatim = CASES[fixture]
    source = read_savepoint(str(FIXTURES / fixture), types=types)
    op = "keyed-states" if fixture == "heap_canonical" else "kryo-states"
    removed = "v_long" if fixture == "heap_canonical" else "k_after"
    edits = SavepointEdits().rename_operator(op, "renamed").remove_state(op, removed)
    edit_savepoint(source, str(tmp_path / "sp"), edits)
    back = read_savepoint(str(tmp_path / "sp"), types=types, flink_version="2.3")
    assert back.operator("renamed").operator_id == operator_id_hex("renamed")
    old, new = operator_id_hex(op), operator_id_hex("renamed")
    want = {
        (new if o == old else o, s): v
        for (o, s), v in keyed_tables(source).items()
        if (o, s) != (old, removed)
    }
    assert keyed_tables(back) == want
    for o, state in verbatim:
        assert raw_entries(back, "renamed" if o == op else o, state) == raw_entries(source, o, state)


def test_what_stays_refused(tmp_path: Path) -> None:
    """Setting a carried state from rows, moving RowData keys to other key groups, carrying from
    a heap checkpoint and converting to our format: [FLINK_UNSUPPORTED] naming the state, no file."""
    heap = read_savepoint(str(FIXTURES / "heap_canonical"))
    # undeclared, the Kryo state's values are bytes: they fit, but the state is not set (no
    # declaration says how to encode them; declared, it is: test_flink_kryo_write)
    edits = SavepointEdits().set_keyed_state("keyed-states", "v_kryo", [{"key": 1, "value": b"\x01"}])
    with pytest.raises(UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\].*'v_kryo'.*not set"):
        edit_savepoint(heap, str(tmp_path / "set"), edits)
    sql = read_savepoint(str(FIXTURES / "sql_heap"))
    with pytest.raises(
        UnsupportedFlinkWriteError,
        match=r"^\[FLINK_UNSUPPORTED\] operator '4_deduplicate': the key: SQL RowData.*max parallelism 128$",
    ):
        write_savepoint(sql, str(tmp_path / "rescaled"), max_parallelism=256)
    checkpoint = read_savepoint(str(FIXTURES / "heap_checkpoint"), types={"v_kryo": OPAQUE})
    with pytest.raises(
        UnsupportedFlinkWriteError,
        match=r"^\[FLINK_UNSUPPORTED\] operator 'keyed-states': state 'v_kryo': the Kryo.*heap checkpoint",
    ):
        write_savepoint(checkpoint, str(tmp_path / "checkpoint"), operators=["keyed-states"])
    assert not list(tmp_path.iterdir())
    without_timers = SavepointEdits()
    for timers in _TIMERS:
        without_timers = without_timers.remove_state("kryo-states", timers)
    edited = edit_savepoint(sql, str(tmp_path / "edited"), without_timers)
    with pytest.raises(
        UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\].*'k_rich': RAW\(SqlJob\$Rich\)"
    ):
        import_savepoint(edited, str(tmp_path / "ours"), uids=["kryo-states"], operators=["kryo-states"])
    assert not (tmp_path / "ours").exists()


class _KryoOperatorStates(OperatorSource):
    """An operator whose list, union and broadcast states hold Kryo values (Flink's bytes of
    FixtureJob.Opaque), with Flink's meta info for them: what a Flink job with such states
    snapshots (no committed fixture has one)."""

    def __init__(self, parallelism: int) -> None:
        self.name, self.operator_id = "kryo-ops", operator_id("kryo-ops")
        self.parallelism, self.max_parallelism = parallelism, 128
        self.key_type, self.states = None, ()

    def keyed_columns(self, index: int) -> Iterator[tuple[int, StateColumns]]:
        return iter(())

    def operator_states(self) -> list[list[OperatorStateData]]:
        opaque = pa.struct([("value", pa.int64())])
        out = []
        for sub in range(self.parallelism):
            elements = [encode(opaque, {"value": 10 * sub + i}) for i in range(sub + 2)]
            rules = Output("rules")
            rules.i32(2, "size")
            for i in range(2):
                rules.utf(f"r{sub}-{i}", "key")
                rules.raw(encode(opaque, {"value": i - sub}))
            out.append(
                [
                    _kryo_state("k_list", OperatorStateMode.SPLIT_DISTRIBUTE, elements),
                    _kryo_state("k_union", OperatorStateMode.UNION, elements[:1]),
                    _kryo_state("k_rules", OperatorStateMode.BROADCAST, {0: bytes(rules.buf)}),
                ]
            )
        return out


def _kryo_state(name: str, mode: OperatorStateMode, elements: Any) -> OperatorStateData:
    meta = Output(name)
    broadcast = mode is OperatorStateMode.BROADCAST
    meta.utf(name, "name")
    meta.i32(2 if broadcast else 1, "backend state type")
    meta.i32(1, "option count")
    meta.utf("OPERATOR_STATE_DISTRIBUTION_MODE", "option")
    meta.utf(mode.name, "mode")
    meta.i32(2 if broadcast else 1, "serializer count")
    meta.utf("VALUE_SERIALIZER", "serializer key")
    meta.i32(2, "top level")
    meta.utf("org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot", "class")
    meta.i32(2, "version")
    meta.utf("FixtureJob$Opaque", "Kryo class")
    for _ in range(3):
        meta.i64(0x4F2C69A3D70, "optional map")
        meta.i32(0, "size")
    if broadcast:
        meta.utf("KEY_SERIALIZER", "serializer key")
        Snapshot(ATOMIC_CLASSES["STRING"]).write_top_level(meta, FlinkTarget())
    bytes_type = Types.PRIMITIVE_ARRAY(Types.BYTE())
    return OperatorStateData(name, mode, bytes_type, elements, Types.STRING(), {VERBATIM: bytes(meta.buf)})


def _elements(sp: FlinkSavepoint, name: str) -> list[list[bytes]]:
    """Each subtask's element bytes of operator state ``name`` (a broadcast state: its map)."""
    out = []
    for sub in sp.operator(operator_id_hex("kryo-ops")).subtasks:
        handle = sub.managed_operator
        assert handle is not None and handle.stream is not None
        data = handle.stream.read(sp.directory, sp.storage)
        out.append(operator_elements(data, False, handle, name, name))
    return out


def _all(parts: list[list[bytes]]) -> list[bytes]:
    return sorted(e for part in parts for e in part)


def test_operator_states_with_kryo_elements_carried(tmp_path: Path) -> None:
    """List, union and broadcast state of Kryo values read from a savepoint and written again at
    another parallelism: Flink's redistribution of the element bytes as they were."""
    source_dir = tmp_path / "source"
    write_operators([_KryoOperatorStates(2)], str(source_dir), 1)
    # Kryo 5's bytes: V3 _metadata does not tell a release, so carrying them needs it named
    source = read_savepoint(str(source_dir), flink_version="2.3")
    assert {s.name: s.serializer for s in source.states()} == dict.fromkeys(
        ["k_list", "k_union", "k_rules"], "FixtureJob$Opaque"
    )
    written = write_savepoint(source, str(tmp_path / "sp"), parallelism=3)
    assert [s.__dict__ for s in written.states()] == [s.__dict__ for s in source.states()]
    before, after = _elements(source, "k_list"), _elements(written, "k_list")
    assert len(after) == 3 and _all(after) == _all(before)
    assert _all(_elements(written, "k_union")) == _all(_elements(source, "k_union"))
    rules = _elements(source, "k_rules")
    assert _elements(written, "k_rules") == [rules[0], rules[1], rules[0]]  # subtask i: old i % 2
    again = write_savepoint(written.with_flink_version("2.3"), str(tmp_path / "again"))
    for name in ("k_list", "k_union", "k_rules"):
        assert _elements(again, name) == _elements(written, name)
