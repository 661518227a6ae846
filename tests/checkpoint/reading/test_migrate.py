"""Restoring with changed types, max parallelism rewrites, pickled values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointError, CheckpointStorage, open_checkpoint
from flinkstate.checkpoint.writing.rewrite import rewrite_max_parallelism
from flinkstate.state import (
    FlinkStateError,
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    StateTtlConfig,
    Time,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
)
from flinkstate.state.operator import OperatorStateBackend

OLD_ROW = Types.ROW_NAMED(["n"], [Types.INT()])
NEW_ROW = Types.ROW_NAMED(["n", "note"], [Types.LONG(), Types.STRING()])


def _checkpoint(root: Path, build: Any, max_p: int = 128) -> str:
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=max_p)
    build(backend)
    pending = CheckpointStorage(str(root)).begin()
    pending.write_keyed("op", backend)
    ops = OperatorStateBackend()
    ops.get_list_state(ListStateDescriptor("offsets", Types.LONG())).add_all([1, 2, 3])
    pending.write_operator("op", ops, max_parallelism=max_p)
    pending.commit()
    return str(root)


def _old_types(backend: HeapKeyedStateBackend) -> None:
    for k in range(50):
        backend.set_current_key(k)
        backend.get_state(ValueStateDescriptor("int", Types.INT())).update(k)
        backend.get_state(ValueStateDescriptor("float", Types.FLOAT())).update(k / 2)
        backend.get_state(ValueStateDescriptor("row", OLD_ROW)).update((k,))
        backend.get_list_state(ListStateDescriptor("rows", OLD_ROW)).add((k,))
        backend.get_map_state(MapStateDescriptor("map", Types.INT(), OLD_ROW)).put(k, (k,))


def test_compatible_changes_migrate(tmp_path: Path) -> None:
    root = _checkpoint(tmp_path / "root", _old_types)
    backend = open_checkpoint(root).keyed_backend("op", 0, 1)
    backend.set_current_key(7)
    assert backend.get_state(ValueStateDescriptor("int", Types.LONG())).value() == 7
    assert backend.get_state(ValueStateDescriptor("float", Types.DOUBLE())).value() == 3.5
    assert backend.get_state(ValueStateDescriptor("row", NEW_ROW)).value() == (7, None)
    assert list(backend.get_list_state(ListStateDescriptor("rows", NEW_ROW)).get()) == [(7, None)]
    assert backend.get_map_state(MapStateDescriptor("map", Types.LONG(), NEW_ROW)).get(7) == (7, None)
    # the migrated state is checkpointed with its new types
    pending = CheckpointStorage(str(tmp_path / "again")).begin()
    pending.write_keyed("op", backend)
    metas = {m.name: m for m in pending.commit().manifest.operators[0].keyed_states}
    assert metas["row"].value_type == NEW_ROW and metas["int"].value_type == Types.LONG()


@pytest.mark.parametrize(
    ("register", "code"),
    [
        (lambda b: b.get_state(ValueStateDescriptor("int", Types.STRING())), "STATE_MIGRATION"),
        (
            lambda b: b.get_state(ValueStateDescriptor("row", Types.ROW_NAMED(["m"], [Types.INT()]))),
            "STATE_MIGRATION",
        ),
        (lambda b: b.get_state(ValueStateDescriptor("float", Types.INT())), "STATE_MIGRATION"),
        (lambda b: b.get_list_state(ListStateDescriptor("int", Types.INT())), "STATE_KIND_CONFLICT"),
    ],
)
def test_incompatible_changes_are_typed_errors(tmp_path: Path, register: Any, code: str) -> None:
    backend = open_checkpoint(_checkpoint(tmp_path / "root", _old_types)).keyed_backend("op", 0, 1)
    with pytest.raises(FlinkStateError, match=code):
        register(backend)


def test_adding_or_dropping_ttl_is_refused(tmp_path: Path) -> None:
    backend = open_checkpoint(_checkpoint(tmp_path / "root", _old_types)).keyed_backend("op", 0, 1)
    desc = ValueStateDescriptor("int", Types.INT())
    desc.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(5)).build())
    with pytest.raises(FlinkStateError, match=r"STATE_MIGRATION.*TTL"):
        backend.get_state(desc)


def test_other_key_type_or_max_parallelism_is_refused(tmp_path: Path) -> None:
    checkpoint = open_checkpoint(_checkpoint(tmp_path / "root", _old_types))
    with pytest.raises(FlinkStateError, match=r"STATE_MIGRATION.*max parallelism"):
        checkpoint.restore_keyed(HeapKeyedStateBackend(max_parallelism=64), "op")
    with pytest.raises(FlinkStateError, match=r"STATE_MIGRATION.*key type"):
        checkpoint.restore_keyed(HeapKeyedStateBackend(key_type=Types.STRING()), "op")


def test_rewrite_max_parallelism_reassigns_every_key(tmp_path: Path) -> None:
    source = open_checkpoint(_checkpoint(tmp_path / "root", _old_types, max_p=128))
    target = rewrite_max_parallelism(source, str(tmp_path / "rewritten"), 512)
    assert target.manifest.operators[0].max_parallelism == 512
    backend = open_checkpoint(str(tmp_path / "rewritten")).keyed_backend("op", 0, 1)
    assert backend.max_parallelism == 512 and sorted(backend.get_keys("int")) == list(range(50))
    for k in range(50):
        backend.set_current_key(k)
        assert backend.get_current_key_group() == assign_to_key_group(k, 512)
        assert backend.get_state(ValueStateDescriptor("int", Types.INT())).value() == k
    ops = open_checkpoint(str(tmp_path / "rewritten")).operator_backend("op", 0, 1)
    assert sorted(ops.get_list_state(ListStateDescriptor("offsets", Types.LONG())).get()) == [1, 2, 3]


def test_pickled_values_need_permission(tmp_path: Path) -> None:
    class Point:
        def __init__(self, x: int) -> None:
            self.x = x

    def build(backend: HeapKeyedStateBackend) -> None:
        backend.set_current_key(1)
        backend.get_state(ValueStateDescriptor("obj", Types.PICKLED_BYTE_ARRAY())).update({"any": [1, 2]})

    root = _checkpoint(tmp_path / "root", build)
    doc = json.loads((tmp_path / "root" / "chk-1" / "_metadata").read_text())
    states = {s["name"]: s for s in doc["operators"][0]["keyed_states"]}
    assert states["obj"]["pickled"] is True
    with pytest.raises(CheckpointError, match="PICKLE_NOT_ALLOWED"):
        open_checkpoint(root).keyed_backend("op", 0, 1)
    backend = open_checkpoint(root, allow_pickle=True).keyed_backend("op", 0, 1)
    backend.set_current_key(1)
    assert backend.get_state(ValueStateDescriptor("obj", Types.PICKLED_BYTE_ARRAY())).value() == {
        "any": [1, 2]
    }
    assert Point(1).x == 1
