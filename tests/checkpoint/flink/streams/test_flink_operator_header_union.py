"""An operator's operator states are those of every subtask's header, not the first one's.

Flink writes in each subtask's operator state header the states that subtask registered.
The fixture is edited to show it: subtask 0's union state ``op_union`` is renamed
``op_unioX`` (same length, so no offset moves) both in its stream's header and in its
handle in ``_metadata``; ``op_union`` is then registered by subtask 1 only.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from flink_model import FIXTURES

from flinkstate.checkpoint.flink import read_savepoint

OPERATOR = "operator-states"
STATE, RENAMED = "op_union", "op_unioX"


def _utf(name: str) -> bytes:
    return len(name).to_bytes(2, "big") + name.encode()


def _rename_in_subtask_0(root: Path) -> None:
    sp = read_savepoint(str(root))
    handles = {s.index: s.managed_operator for s in sp.operator(OPERATOR).subtasks}
    first, second = handles[0], handles[1]
    assert first is not None and first.stream is not None and first.stream.kind == "relative"
    assert second is not None and second.stream is not None
    stream = root / first.stream.name
    data = stream.read_bytes()
    assert data.count(_utf(STATE)) == 1
    stream.write_bytes(data.replace(_utf(STATE), _utf(RENAMED)))
    # _metadata: each subtask's handle names its states, then its file: subtask 0's come first
    meta = (root / "_metadata").read_bytes()
    at = meta.index(_utf(STATE))
    assert at < meta.index(first.stream.name.encode()) < meta.index(second.stream.name.encode())
    (root / "_metadata").write_bytes(meta[:at] + _utf(RENAMED) + meta[at + len(_utf(STATE)) :])


def test_a_state_only_a_later_subtask_registered_is_listed_and_read(tmp_path: Path) -> None:
    root = tmp_path / "savepoint"
    shutil.copytree(FIXTURES / "heap_canonical_files", root)
    before = read_savepoint(str(root)).operator_state(OPERATOR, STATE).to_pylist()
    _rename_in_subtask_0(root)
    sp = read_savepoint(str(root))
    names = [s.name for s in sp.states() if s.operator_uid == OPERATOR]
    assert sorted(names) == sorted(["op_list", STATE, RENAMED])
    assert set(sp.metadata_table().column("name").to_pylist()) >= {STATE, RENAMED}
    # each name reads as exactly its subtasks' elements (with the schema of the state)
    assert sp.schema(OPERATOR, STATE) == sp.schema(OPERATOR, RENAMED)
    renamed = sp.operator_state(OPERATOR, RENAMED).to_pylist()
    kept = sp.operator_state(OPERATOR, STATE).to_pylist()
    assert {r["subtask"] for r in renamed} == {0} and {r["subtask"] for r in kept} == {1}
    assert sorted(map(str, renamed + kept)) == sorted(map(str, before)) and kept
