"""``convert --to flinkstate`` of timers: a Flink savepoint's timers (a KeyedProcessFunction's, of
TimersJob.java, and FixtureJob's window-sum TimeWindow timers; Flink 2.3, 1.20 and 1.17, heap and
RocksDB) arrive in our checkpoint as our timer service keeps them, equal to what our Flink reader
lists and to the model; written back for Flink they are the savepoint's again; timers we cannot
hold are refused before any file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from flink_model import fixture
from timers_model import (
    EVENT,
    OPERATORS,
    PROCESSING,
    TIMER_KINDS,
    WINDOW_KINDS,
    flink_timers,
    model,
    our_timers,
    sources,
)

from flinkstate.checkpoint.flink import import_savepoint, read_savepoint, write_savepoint
from flinkstate.checkpoint.flink.errors import UnsupportedFlinkFeatureError
from flinkstate.checkpoint.flink.types import classes
from flinkstate.checkpoint.flink.types.flink_type import FlinkType
from flinkstate.state import Types
from flinkstate.state.types.mapping import RowTypeInfo

WINDOW_TIMERS = "_timer_state/event_window-timers"


@pytest.mark.parametrize(("version", "kind"), sources(TIMER_KINDS))
def test_process_function_timers_converted(version: str, kind: str, tmp_path: Path) -> None:
    source = read_savepoint(str(fixture(version, kind)))
    ours = import_savepoint(source, str(tmp_path / "ours"), uids=list(OPERATORS))
    for uid, (key_type, max_p) in OPERATORS.items():
        want = model(uid)
        assert flink_timers(source, uid) == want
        assert our_timers(ours, uid) == want  # key groups kept: each timer in its Flink group
        op = ours.operator(uid)
        assert (op.parallelism, op.max_parallelism, op.key_type) == (2, max_p, key_type)
        metas = {m.name: m for m in op.keyed_states}
        for queue in (EVENT, PROCESSING):  # the process runner's timer states
            assert metas[queue].namespace_type is None
            assert (metas[queue].user_key_type, metas[queue].value_type) == (Types.LONG(), Types.BOOLEAN())


@pytest.mark.parametrize(("version", "kind"), sources(WINDOW_KINDS))
def test_window_timers_converted_in_their_windows(version: str, kind: str, tmp_path: Path) -> None:
    source = read_savepoint(str(fixture(version, kind)))
    ours = import_savepoint(source, str(tmp_path / "ours"), uids=["window-sum"], operators=["window-sum"])
    want = flink_timers(source, "window-sum")
    assert len(want) > 10 and {ns for _, _, _, ns, _ in want} >= {(0, 3_600_000)}
    assert our_timers(ours, "window-sum") == want
    meta = next(m for m in ours.operator("window-sum").keyed_states if m.name == WINDOW_TIMERS)
    assert isinstance(meta.namespace_type, RowTypeInfo) and meta.namespace_type.field_names == (
        "start",
        "end",
    )


@pytest.mark.parametrize(("version", "kind"), sources(TIMER_KINDS + WINDOW_KINDS))
def test_converted_then_written_back(version: str, kind: str, tmp_path: Path) -> None:
    """Flink's savepoint -> ours -> Flink's: the same timers in the same key groups."""
    source = read_savepoint(str(fixture(version, kind)))
    uids = list(OPERATORS) if kind in TIMER_KINDS else ["window-sum"]
    ours = import_savepoint(source, str(tmp_path / "ours"), uids=uids, operators=uids)
    back = write_savepoint(ours, str(tmp_path / "back"))
    for uid in uids:
        assert flink_timers(back, uid) == flink_timers(source, uid)


def _patched(source: Any, monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    """``source`` with the keyed header of ``timers`` changed by ``change(event queue info)``."""
    header = source.keyed_header("timers")
    states = tuple(change(s) if s.name == EVENT else s for s in header.states)
    fake = replace(header, states=states)
    real = source.keyed_header
    monkeypatch.setattr(
        source, "keyed_header", lambda op: fake if op == source.operator("timers").operator_id else real(op)
    )


def test_timers_of_another_namespace_are_refused_before_any_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = read_savepoint(str(fixture("2.3", "timers_heap")))
    custom = FlinkType(classes.KRYO, Types.PRIMITIVE_ARRAY(Types.BYTE()), None, java_class="my.Window")

    def in_custom_windows(info: Any) -> Any:
        key, _ = info.value.children
        return replace(info, value=replace(info.value, children=(key, custom)))

    _patched(source, monkeypatch, in_custom_windows)
    target = tmp_path / "out"
    with pytest.raises(
        UnsupportedFlinkFeatureError,
        match=r"\[FLINK_UNSUPPORTED\] operator 'timers', timer service 'user-timers'",
    ):
        import_savepoint(source, str(target), operators=["timers-names", "timers"])
    assert not target.exists()


def test_a_priority_queue_not_named_as_timers_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = read_savepoint(str(fixture("2.3", "timers_rocksdb")))
    _patched(source, monkeypatch, lambda info: replace(info, name="_timer_state/user-timers"))
    with pytest.raises(UnsupportedFlinkFeatureError, match="'_timer_state/user-timers' is not a timer queue"):
        import_savepoint(source, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
