"""An operator's keyed states are those of every subtask's header, not the first subtask's.

Flink writes in each subtask's keyed state header only the states that subtask registered.
The fixture is edited in place to show it: subtask 0's state ``v_long`` is renamed ``v_lonX``
(same length, so no offset moves), so ``v_long`` is registered by subtask 1 only and
``v_lonX`` by subtask 0 only; each must read as exactly its subtask's entries.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from flink_model import FIXTURES, KEYS, VALUES

from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.checkpoint.flink.errors import FlinkHeaderConflictError
from flinkstate.state import ValueStateDescriptor
from flinkstate.state.keygroups.assignment import assign_to_key_group
from flinkstate.state.types.mapping import Types

OPERATOR = "keyed-states"
RENAMED = "v_lonX"


def _rename(root: Path, subtask: int, state: str, to: str) -> range:
    """Rename ``state`` to ``to`` in the keyed header of ``subtask``; its key groups."""
    sp = read_savepoint(str(root))
    handle = next(s for s in sp.operator(OPERATOR).subtasks if s.index == subtask).managed_keyed
    assert handle is not None and handle.stream is not None and handle.stream.kind == "relative"
    path = root / handle.stream.name
    data = path.read_bytes()
    old, new = len(state).to_bytes(2, "big") + state.encode(), len(to).to_bytes(2, "big") + to.encode()
    assert len(old) == len(new) and data.count(old) == 1
    path.write_bytes(data.replace(old, new))
    return handle.key_groups


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "savepoint"
    shutil.copytree(FIXTURES / "heap_canonical_files", root)
    return root


def _owned(groups: range) -> dict[int, int]:
    return {k: VALUES["v_long"](k) for k in KEYS if assign_to_key_group(k, 128, Types.LONG()) in groups}


def test_a_state_only_a_later_subtask_registered_is_read(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    first = _rename(root, 0, "v_long", RENAMED)
    sp = read_savepoint(str(root))
    later = next(s for s in sp.operator(OPERATOR).subtasks if s.index == 1).managed_keyed
    assert later is not None
    names = [s.name for s in sp.states() if s.operator_uid == OPERATOR]
    assert names.count("v_long") == names.count(RENAMED) == 1
    assert set(sp.metadata_table().column("name").to_pylist()) >= {"v_long", RENAMED}
    for state, groups in (("v_long", later.key_groups), (RENAMED, first)):
        table = sp.keyed_state(OPERATOR, state)
        assert {r["key"]: r["value"] for r in table.to_pylist()} == _owned(groups) != {}
    backend = sp.keyed_backend(OPERATOR, 0, 1, states=["v_long", RENAMED])
    for state, groups in (("v_long", later.key_groups), (RENAMED, first)):
        desc = ValueStateDescriptor(state, Types.LONG())
        got = {}
        for key in KEYS:
            backend.set_current_key(key)
            value = backend.get_state(desc).value()
            if value is not None:
                got[key] = value
        assert got == _owned(groups)


def test_one_state_described_differently_by_two_subtasks_is_an_error(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _rename(root, 0, "v_long", RENAMED)  # a LONG value state in subtask 0 ...
    _rename(root, 1, "v_char", RENAMED)  # ... and a CHAR value state in subtask 1
    sp = read_savepoint(str(root))
    with pytest.raises(FlinkHeaderConflictError, match=rf"\[FLINK_HEADER_CONFLICT\].*{RENAMED}"):
        sp.states()
    with pytest.raises(FlinkHeaderConflictError):
        sp.keyed_state(OPERATOR, "v_int")


def test_a_header_longer_than_the_first_read_is_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from flinkstate.checkpoint.flink.streams import header_read as header

    want = [s.name for s in read_savepoint(str(FIXTURES / "heap_canonical_files")).states()]
    monkeypatch.setattr(header, "HEADER_PREFIX", 16)  # every header runs past its first read
    assert [s.name for s in read_savepoint(str(FIXTURES / "heap_canonical_files")).states()] == want
