"""Pass-through: states of a Flink savepoint whose serializers the writer cannot encode (Kryo,
SQL RowData) written back unchanged, their meta info and value bytes carried verbatim.

The model is the source read with our reader (declared Kryo types decoding the Kryo states):
the written savepoint, read the same way, holds every state equal, and each carried state's
bytes (key bytes after the key-group prefix, value bytes) equal to the source's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flink_model import FIXTURES
from sql_model import RICH_DDL

from flinkstate.checkpoint import SavepointEdits
from flinkstate.checkpoint.flink import (
    FlinkSavepoint,
    UnsupportedFlinkWriteError,
    edit_savepoint,
    import_savepoint,
    operator_id_hex,
    read_savepoint,
    write_savepoint,
)
from flinkstate.checkpoint.flink.key_hash import flink_key_group_assigner
from flinkstate.checkpoint.flink.write_sources import operators_of

OPAQUE = "STRUCT<value: BIGINT NOT NULL>"  # FixtureJob's Kryo class, declared
_TIMERS = ["_timer_state/processing_user-timers", "_timer_state/event_user-timers"]
#: Per fixture: the declared Kryo types, and the keyed states carried verbatim.
CASES: dict[str, tuple[dict[str, str], set[tuple[str, str]]]] = {
    name: ({"v_kryo": OPAQUE}, {("keyed-states", "v_kryo")})
    for name in ("heap_canonical", "rocksdb_canonical", "heap_snappy", "rocksdb_native")
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
    return {(op.name, s.name) for op in operators_of(sp, None) for s in op.states if s.verbatim is not None}


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_written_back_as_it_was(tmp_path: Path, fixture: str) -> None:
    types, verbatim = CASES[fixture]
    source = read_savepoint(str(FIXTURES / fixture), types=types)
    assert carried(source) == verbatim
    written = write_savepoint(source, str(tmp_path / "sp"))
    back = read_savepoint(str(tmp_path / "sp"), types=types)
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
    back = read_savepoint(str(tmp_path / "sp"), types=types)
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
    back = read_savepoint(str(tmp_path / "sp"), types=types)
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
    heap = read_savepoint(str(FIXTURES / "heap_canonical"), types={"v_kryo": OPAQUE})
    edits = SavepointEdits().set_keyed_state("keyed-states", "v_kryo", [{"key": 1, "value": b"x"}])
    with pytest.raises(UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\].*'v_kryo'.*not set"):
        edit_savepoint(heap, str(tmp_path / "set"), edits)
    sql = read_savepoint(str(FIXTURES / "sql_heap"))
    with pytest.raises(
        UnsupportedFlinkWriteError, match=r"'4_deduplicate'.*RowData.*keep max parallelism 128"
    ):
        write_savepoint(sql, str(tmp_path / "rescaled"), max_parallelism=256)
    checkpoint = read_savepoint(str(FIXTURES / "heap_checkpoint"), types={"v_kryo": OPAQUE})
    with pytest.raises(UnsupportedFlinkWriteError, match=r"'v_kryo'.*Kryo.*heap checkpoint"):
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
