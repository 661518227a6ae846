"""Offline edits of our savepoints: the edited savepoint read back equals the model edited by
hand, the source is untouched, the result is self-contained, and bad edits are refused with
their codes before anything is written."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from edit_model import (
    CASES,
    KEYS,
    MAX_P,
    NEW_COUNTS,
    NEW_EVENTS,
    PARALLELISM,
    Model,
    build,
    dump,
    model,
    rename,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flinkstate.checkpoint import (
    METADATA,
    CheckpointCorruptError,
    CheckpointError,
    CompletedCheckpoint,
    EditError,
    SavepointEdits,
    Storage,
    edit_checkpoint,
    open_checkpoint,
    plan_checkpoint_edits,
)
from flinkstate.state import StateTtlConfig, Types, ValueStateDescriptor, assign_to_key_group


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build(str(tmp_path_factory.mktemp("edit") / "source"))


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_edit_read_back_is_the_model_edited(
    source: CompletedCheckpoint, location: tuple[str, dict[str, Any]], case: str
) -> None:
    """Written to every storage (the source is local)."""
    root, options = location
    edits, change = CASES[case]
    before = _files(Path(source.directory.root))
    out = edit_checkpoint(source, f"{root}/edited", edits, storage=options)
    want = model()
    change(want)
    assert dump(out) == want
    assert dump(open_checkpoint(f"{root}/edited", options)) == want
    assert _files(Path(source.directory.root)) == before, "the source is not changed"
    for op in out.manifest.operators:  # keys sit in their key groups, subtasks hold their ranges
        assert op.max_parallelism == (edits.max_parallelism or MAX_P) and op.parallelism == PARALLELISM
        for sub in op.subtasks:
            for refs in sub.keyed.values():
                for ref in refs:
                    assert sub.key_group_range is not None
                    assert all(
                        sub.key_group_range[0] <= kg <= sub.key_group_range[1] for kg in ref.key_groups
                    )


def test_edited_savepoint_is_self_contained(source: CompletedCheckpoint, tmp_path: Path) -> None:
    edits = (
        SavepointEdits()
        .rename_operator("counter", "c2")
        .set_keyed_state("other", "log", NEW_EVENTS, kind="list")
    )
    out = edit_checkpoint(source, str(tmp_path / "a"), edits)
    listed = {f.path for f in out.manifest.files()}
    assert listed == set(_files(tmp_path / "a")) - {METADATA}, "exactly the referenced files, beside it"
    assert not out.manifest.incremental
    (tmp_path / "a").rename(tmp_path / "moved")
    want = model()
    rename(want, "counter", "c2")
    want["other"]["log"] = {"b": ["x", "y"], "new": ["z"]}
    assert dump(open_checkpoint(str(tmp_path / "moved"))) == want


def _as_strings(rows: pa.Table) -> pa.Table:
    return rows.set_column(1, "value", rows.column("value").cast(pa.string()))


def test_replaced_state_keeps_its_ttl(tmp_path: Path) -> None:
    cp = build(str(tmp_path / "src"))
    ttl = StateTtlConfig.new_builder(datetime.timedelta(hours=1)).build()
    start = int(time.time() * 1000)
    once = edit_checkpoint(
        cp, str(tmp_path / "ttl"), SavepointEdits().set_keyed_state("counter", "fresh", NEW_EVENTS, ttl=ttl)
    )
    meta = once.state_meta("counter", "fresh")
    assert meta.ttl == ttl and meta.value_type == Types.STRING()
    again = edit_checkpoint(
        once,
        str(tmp_path / "ttl2"),
        SavepointEdits().set_keyed_state(
            "counter", "fresh", _as_strings(NEW_COUNTS), value_type=Types.STRING()
        ),
    )
    assert again.state_meta("counter", "fresh").ttl == ttl, "a replaced state keeps its TTL"
    backend = again.keyed_backend("counter", 0, 1)
    desc = ValueStateDescriptor("fresh", Types.STRING())
    desc.enable_time_to_live(ttl)
    got = {}
    for key in ("a", "zz", "\U0001f600"):
        backend.set_current_key(key)
        got[key] = backend.get_state(desc).value()
    assert got == {"a": "3", "zz": "2", "\U0001f600": "-4"}, "live: stamped at the edit"
    assert int(time.time() * 1000) >= start


def test_dry_run_plan_lists_changes_and_writes_nothing(source: CompletedCheckpoint, tmp_path: Path) -> None:
    edits, _ = CASES["everything"]
    plan = plan_checkpoint_edits(source, edits)
    got = [(c.action, c.operator, c.state, c.before, c.after) for c in plan.changes]
    assert got == [
        ("remove operator", "other", "", "", ""),
        ("rename operator", "counter", "", "counter", "cnt"),
        ("remove state", "counter", "totals", "", ""),
        ("replace state", "counter", "count", "", "4 rows"),
        ("max parallelism", "counter", "", str(MAX_P), "128"),
        ("max parallelism", "source", "", str(MAX_P), "128"),
    ]
    added = plan_checkpoint_edits(source, CASES["add operator"][0]).changes
    assert [(c.action, c.operator, c.after) for c in added][:2] == [
        ("add operator", "new-op", f"parallelism {PARALLELISM}, max parallelism {MAX_P}"),
        ("add state", "new-op", "3 rows"),
    ]
    assert not (tmp_path / "x").exists()


BAD: dict[str, tuple[Callable[[], SavepointEdits], str]] = {
    "unknown operator": (lambda: SavepointEdits().remove_operator("nope"), "UNKNOWN_OPERATOR"),
    "unknown state": (lambda: SavepointEdits().remove_state("counter", "nope"), "UNKNOWN_STATE"),
    "rename onto another": (lambda: SavepointEdits().rename_operator("counter", "other"), "UID_COLLISION"),
    "two onto one": (
        lambda: SavepointEdits().rename_operator("counter", "x").rename_operator("other", "x"),
        "UID_COLLISION",
    ),
    "add an existing operator": (
        lambda: SavepointEdits().add_operator("counter").set_keyed_state("counter", "x", NEW_COUNTS),
        "UID_COLLISION",
    ),
    "add an operator without state": (lambda: SavepointEdits().add_operator("new-op"), "INVALID_EDIT"),
    "an int beyond a long": (
        lambda: SavepointEdits().set_keyed_state("counter", "count", [{"key": "a", "value": 2**63}]),
        "TYPE_MISMATCH",
    ),
    "rename removed": (
        lambda: SavepointEdits().remove_operator("other").rename_operator("other", "x"),
        "EDIT_CONFLICT",
    ),
    "set removed state": (
        lambda: (
            SavepointEdits().remove_state("counter", "count").set_keyed_state("counter", "count", NEW_COUNTS)
        ),
        "EDIT_CONFLICT",
    ),
    "state of removed operator": (
        lambda: SavepointEdits().remove_operator("counter").remove_state("counter", "count"),
        "EDIT_CONFLICT",
    ),
    "other kind": (
        lambda: SavepointEdits().set_keyed_state("counter", "count", NEW_EVENTS, kind="list"),
        "EDIT_CONFLICT",
    ),
    "max parallelism below parallelism": (
        lambda: SavepointEdits().with_max_parallelism(1),
        "INVALID_PARALLELISM",
    ),
    "value not of the state's type": (
        lambda: SavepointEdits().set_keyed_state("counter", "count", NEW_EVENTS),
        "TYPE_MISMATCH",
    ),
    "integers declared strings": (
        lambda: SavepointEdits().set_keyed_state("counter", "x", NEW_COUNTS, value_type=Types.STRING()),
        "TYPE_MISMATCH",
    ),
    "key of another type": (
        lambda: SavepointEdits().set_keyed_state(
            "counter", "n", pa.table({"key": [1], "value": [2]}), key_type=Types.LONG()
        ),
        "KEY_TYPE_MISMATCH",
    ),
    "null key": (
        lambda: SavepointEdits().set_keyed_state(
            "counter", "count", pa.table({"key": ["a", None], "value": [1, 2]})
        ),
        "INVALID_KEY",
    ),
    "null list element": (
        lambda: SavepointEdits().set_keyed_state(
            "counter",
            "events",
            pa.table(
                {"key": ["a"], "value": [None]},
                schema=pa.schema([("key", pa.string()), ("value", pa.string())]),
            ),
        ),
        "NULL_ELEMENT",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_edits_are_refused_before_anything_is_written(
    source: CompletedCheckpoint, tmp_path: Path, case: str
) -> None:
    make, code = BAD[case]
    with pytest.raises(CheckpointError) as info:
        edit_checkpoint(source, str(tmp_path / "out"), make())
    assert isinstance(info.value, EditError) and info.value.code == code, info.value
    assert str(info.value).startswith(f"[{code}]")
    assert not (tmp_path / "out").exists() or not _files(tmp_path / "out")


def test_bad_rows_and_names_are_refused() -> None:
    with pytest.raises(EditError, match=r"^\[INVALID_EDIT\].*no column \['value'\]"):
        SavepointEdits().set_keyed_state("counter", "x", pa.table({"key": [1]}))
    with pytest.raises(EditError, match=r"^\[INVALID_EDIT\].*unknown kind"):
        SavepointEdits().set_keyed_state("counter", "x", [{"key": 1, "value": 2}], kind="bag")
    with pytest.raises(EditError, match=r"^\[INVALID_EDIT\]"):
        SavepointEdits().rename_operator("counter", "")
    with pytest.raises(EditError, match=r"^\[INVALID_EDIT\].*not set"):
        SavepointEdits().set_keyed_state("counter", "x", {1, 2})


def test_rows_from_pandas_and_dicts(source: CompletedCheckpoint, tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"key": ["a", "b"], "value": [1.5, float("nan")]})
    edits = (
        SavepointEdits()
        .set_keyed_state("other", "ratio", frame)
        .set_keyed_state(
            "other", "tags", [{"key": "a", "value": "t1"}, {"key": "a", "value": "t2"}], kind="list"
        )
    )
    got = dump(edit_checkpoint(source, str(tmp_path / "p"), edits))["other"]
    assert got["ratio"]["a"] == 1.5 and got["ratio"]["b"] != got["ratio"]["b"]  # NaN kept
    assert got["tags"] == {"a": ["t1", "t2"]}


def test_target_holding_a_savepoint_is_refused(source: CompletedCheckpoint, tmp_path: Path) -> None:
    edit_checkpoint(source, str(tmp_path / "t"), SavepointEdits().remove_operator("other"))
    before = _files(tmp_path / "t")
    with pytest.raises(CheckpointError, match=r"^\[CHECKPOINT_EXISTS\]"):
        edit_checkpoint(source, str(tmp_path / "t"), SavepointEdits().remove_operator("counter"))
    assert _files(tmp_path / "t") == before


def test_a_corrupt_source_file_leaves_no_savepoint(tmp_path: Path) -> None:
    cp = build(str(tmp_path / "src"))
    victim = cp.manifest.operator("source")
    assert victim is not None
    path = tmp_path / "src" / next(iter(victim.subtasks[1].operator.values()))[0].path
    path.write_bytes(path.read_bytes()[:-3] + b"xyz")
    with pytest.raises(CheckpointCorruptError):
        edit_checkpoint(cp, str(tmp_path / "out"), SavepointEdits().rename_operator("counter", "c"))
    assert not (tmp_path / "out").exists() or not _files(tmp_path / "out"), "what was copied is deleted"


def test_edit_of_a_memory_checkpoint(tmp_path: Path) -> None:
    url = "memory://flinkstate-tests/edit-source"
    cp = build(url)
    try:
        out = edit_checkpoint(
            cp, "memory://flinkstate-tests/edit-target", SavepointEdits().with_max_parallelism(40)
        )
        assert dump(out) == model()
        groups = {kg for kg, _tables in out.read_keyed("counter", "count")}
        assert groups == {assign_to_key_group(k, 40, Types.STRING()) for k in KEYS}
    finally:
        for where in (url, "memory://flinkstate-tests/edit-target"):
            Storage(where).delete("")


@st.composite
def _random_edits(draw: st.DrawFn) -> tuple[SavepointEdits, Model]:
    """Random edits of the model's savepoint, with the model edited by hand."""
    want = model()
    edits = SavepointEdits()
    uids = sorted(want)
    removed = draw(st.lists(st.sampled_from(uids), unique=True, max_size=2))
    for uid in removed:
        edits = edits.remove_operator(uid)
    kept = [u for u in uids if u not in removed]
    for uid in kept:
        for state in sorted(want[uid]):
            if draw(st.booleans()):
                edits = edits.remove_state(uid, state)
                del want[uid][state]
    keyed = [u for u in kept if u != "source"]
    if keyed and draw(st.booleans()):
        uid = draw(st.sampled_from(keyed))
        pairs = draw(
            st.lists(st.tuples(st.sampled_from(KEYS[:6]), st.integers(-(2**63), 2**63 - 1)), max_size=5)
        )
        table = pa.table({"key": pa.array([k for k, _ in pairs], pa.string()),
                          "value": pa.array([v for _, v in pairs], pa.int64())})  # fmt: skip
        edits = edits.set_keyed_state(uid, "fresh", table)
        want[uid]["fresh"] = dict(pairs)
    new_names = draw(st.permutations(kept))  # renames among the kept uids, swaps included
    renames = {
        old: f"{new}-r" if draw(st.booleans()) else new for old, new in zip(kept, new_names, strict=True)
    }
    for old, new in renames.items():
        if old != new:
            edits = edits.rename_operator(old, new)
    want = {renames.get(uid, uid): states for uid, states in want.items() if uid in kept}
    max_p = draw(st.sampled_from([None, PARALLELISM, 16, MAX_P, 100]))
    if max_p is not None:
        edits = edits.with_max_parallelism(max_p)
    return edits, want


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_random_edits())
def test_random_edits_match_the_model(
    source: CompletedCheckpoint, case: tuple[SavepointEdits, Model]
) -> None:
    edits, want = case
    target = f"memory://flinkstate-tests/edit-{uuid.uuid4().hex}"
    try:
        out = edit_checkpoint(source, target, edits)
        assert dump(out) == want
        assert {op.max_parallelism for op in out.manifest.operators} <= {edits.max_parallelism or MAX_P}
    finally:
        Storage(target).delete("")
