"""Full-checkpoint key-group handles of Flink 1.x: tag 3 (1.13/1.14; tag 12 from 1.15 on, with a
handle id), holding either the heap backend's layout or, for a RocksDB full checkpoint of
1.13-1.15, the canonical one. Built from real fixtures: their streams inline, their key-group
handles written under tag 3 (the bytes of a tag-7 handle without its tag are those of tag 3)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from flink_model import HEAP_READABLE, KEYS, LISTS, MAPS, VALUES, VERSIONS, fixture, windows

from flinkstate.checkpoint.flink import FlinkSavepoint, read_savepoint
from flinkstate.checkpoint.flink.metadata import metadata_write
from flinkstate.checkpoint.flink.metadata.metadata_write import (
    KeyedOut,
    OperatorOut,
    OperatorStateEntryOut,
    OperatorStateOut,
    StreamOut,
    SubtaskOut,
    metadata_bytes,
)


def _stream(sp: FlinkSavepoint, handle: object) -> StreamOut:
    stream = handle.stream  # type: ignore[attr-defined]
    data = stream.read(sp.directory, sp.storage)
    return StreamOut(stream.name.rsplit("/", 1)[-1], len(data), data)


def _with_tag_3(source: Path, target: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``source`` rewritten with every stream inline and its key-group handles under tag 3."""
    sp = read_savepoint(str(source))
    operators = []
    for op in sp.operators:
        subtasks = []
        for sub in op.subtasks:
            keyed = sub.managed_keyed
            assert keyed is None or keyed.kind in ("key_groups", "heap_checkpoint")
            operator = sub.managed_operator
            subtasks.append(
                SubtaskOut(
                    sub.index,
                    None
                    if keyed is None
                    else KeyedOut(keyed.first_key_group, keyed.offsets, _stream(sp, keyed)),
                    None
                    if operator is None
                    else OperatorStateOut(
                        tuple(OperatorStateEntryOut(e.name, e.mode, e.offsets) for e in operator.states),
                        _stream(sp, operator),
                    ),
                )
            )
        operators.append(
            OperatorOut(bytes.fromhex(op.operator_id), op.parallelism, op.max_parallelism, tuple(subtasks))
        )
    monkeypatch.setattr(metadata_write, "_SAVEPOINT_KEY_GROUPS", 3)
    target.mkdir()
    (target / "_metadata").write_bytes(metadata_bytes(sp.meta.checkpoint_id, operators, str(target)))
    return target


def _check(sp: FlinkSavepoint, readable: set[str] | None) -> None:
    for state, expect in VALUES.items():
        if readable is not None and state not in readable:
            continue
        got = {r["key"]: r["value"] for r in sp.keyed_state("keyed-states", state).to_pylist()}
        for k in KEYS:
            value, want = (sorted(got[k]) if state == "v_map" else got[k]), expect(k)
            assert math.isclose(value, want) if isinstance(want, float) else value == want, (state, k)
    for state, expect in LISTS.items():
        if readable is not None and state not in readable:
            continue
        rows = sorted(
            sp.keyed_state("keyed-states", state).to_pylist(), key=lambda r: (r["key"], r["position"])
        )
        assert {k: [r["value"] for r in rows if r["key"] == k] for k in KEYS} == {k: expect(k) for k in KEYS}
    for state, expect in MAPS.items():
        if readable is not None and state not in readable:
            continue
        rows = sp.keyed_state("keyed-states", state).to_pylist()
        assert {k: {r["user_key"]: r["value"] for r in rows if r["key"] == k} for k in KEYS} == {
            k: expect(k) for k in KEYS
        }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", ["rocksdb_canonical", "heap_canonical"])
def test_tag_3_with_the_canonical_layout(
    version: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A RocksDB full checkpoint of Flink 1.13/1.14: canonical key groups under tag 3."""
    sp = read_savepoint(str(_with_tag_3(fixture(version, kind), tmp_path / "tag3", monkeypatch)))
    handles = [s.managed_keyed for s in sp.operator("keyed-states").subtasks]
    assert {h.kind for h in handles if h is not None} == {"heap_checkpoint"}  # tag 3: a full checkpoint's
    _check(sp, None)
    window = sp.keyed_state("window-sum", "window-contents").to_pylist()
    assert {(r["key"], r["namespace"]["start"]): r["value"] for r in window} == windows()


@pytest.mark.parametrize("version", VERSIONS)
def test_tag_3_with_the_heap_layout(version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A heap checkpoint of Flink 1.13/1.14: the heap backend's key groups under tag 3."""
    sp = read_savepoint(str(_with_tag_3(fixture(version, "heap_checkpoint"), tmp_path / "tag3", monkeypatch)))
    _check(sp, HEAP_READABLE[version])
    window = sp.keyed_state("window-sum", "window-contents").to_pylist()
    assert {(r["key"], r["namespace"]["start"]): r["value"] for r in window} == windows()
