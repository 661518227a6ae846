"""Diffs with Flink's savepoints (Flink 2.3, 1.20 and 1.17 fixtures): a savepoint and its
conversion to one of ours are identical state by state; one edited value is exactly one change,
Flink against ours and Flink against Flink; operator list, union and broadcast state compare."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from diff_model import applied, contents, expected_counts, read_whole

from flinkstate.checkpoint import DiffSettings, SavepointEdits, diff_state, open_side, state_pairs
from flinkstate.checkpoint.flink import edit_savepoint, import_savepoint, read_savepoint

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
KEYED = "keyed-states"


def _convertible(source: str, target: str) -> str:
    """The fixture without what a conversion refuses (TTL and undecodable states), as a Flink savepoint."""
    sp = read_savepoint(source)
    edits = SavepointEdits()
    for s in sp.states():
        if s.ttl or not s.decodable:
            edits = edits.remove_state(s.operator_uid or s.operator_id, s.name)
    edit_savepoint(sp, target, edits)
    return target


@pytest.fixture(
    scope="module",
    params=["rocksdb_canonical", "heap_canonical", "1.20/heap_canonical", "1.17/rocksdb_canonical"],
)
def converted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(a Flink savepoint, its conversion to one of ours)."""
    root = tmp_path_factory.mktemp("flink-diff")
    flink = _convertible(str(FIXTURES / request.param), str(root / "flink"))
    import_savepoint(read_savepoint(flink), str(root / "ours"))
    return flink, str(root / "ours")


def test_a_savepoint_and_its_conversion_are_identical(converted: tuple[str, str]) -> None:
    flink, ours = (open_side(p) for p in converted)
    pairs = state_pairs(flink, ours)
    assert not pairs.only_old and not pairs.only_new
    kinds = {s.keyed for s in pairs.both}
    assert kinds == {True, False}, "keyed and operator states both compared"
    for s in pairs.both:
        for old, new in ((flink, ours), (ours, flink), (flink, flink)):
            found = diff_state(old, new, s.operator, s.state, DiffSettings())
            assert found.identical and not found.rows, (s, old.label)


def test_one_edited_value_is_exactly_one_change(converted: tuple[str, str], tmp_path: Path) -> None:
    flink_path, ours_path = converted
    sp = read_savepoint(flink_path)
    uid = next(s.operator_uid or s.operator_id for s in sp.states() if s.name == "v_string")
    rows = sp.keyed_state(uid, "v_string").to_pylist()
    edited = {r["key"]: r["value"] for r in rows}
    first = min(edited)
    edited[first] = "ünï-😀 edited"
    del edited[max(edited)]
    table = pa.table({"key": pa.array(list(edited), pa.int64()), "value": list(edited.values())})
    changed = str(tmp_path / "edited")
    edit_savepoint(sp, changed, SavepointEdits().set_keyed_state(uid, "v_string", table))
    for old_path in (ours_path, flink_path):
        found = diff_state(open_side(old_path), open_side(changed), uid, "v_string", DiffSettings())
        assert (found.added, found.removed, found.changed) == (0, 1, 1)
        changes = [r for t in found.rows for r in t.to_pylist()]
        gone = max(r["key"] for r in rows)
        assert sorted((r["change_type"], r["key"]) for r in changes) == [("delete", gone), ("update", first)]
        assert next(r["value"] for r in changes if r["change_type"] == "update") == "ünï-😀 edited"
        a = contents(read_whole(old_path, uid, "v_string").to_pylist())
        b = contents(read_whole(changed, uid, "v_string").to_pylist())
        assert expected_counts(a, b) == (0, 1, 1) and applied(a, changes) == b
    untouched = diff_state(open_side(ours_path), open_side(changed), uid, "v_long", DiffSettings())
    assert untouched.identical
    keyed = diff_state(open_side(ours_path), open_side(changed), uid, "v_string", DiffSettings(keys=(first,)))
    assert (keyed.added, keyed.removed, keyed.changed) == (0, 0, 1)
