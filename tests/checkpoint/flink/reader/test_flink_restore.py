"""A Flink savepoint restored into our live backends, then checkpointed in our format."""

from __future__ import annotations

from pathlib import Path

import pytest
from flink_model import KEYS, LISTS, MAPS, VALUES, VERSIONS, fixture, made

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.checkpoint.flink import FlinkSavepoint, UnsupportedSerializerError, read_savepoint
from flinkstate.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    Types,
    ValueStateDescriptor,
)

STATES = ["v_long", "v_string", "v_pojo", "v_row", "l_long", "m_int_string", "ttl_value", "r_sum"]


@pytest.mark.parametrize(
    ("version", "kind"),
    made(["heap_canonical", "rocksdb_canonical", "heap_snappy", "rocksdb_native", "rocksdb_checkpoint"]),
)
def test_restore_keyed_at_another_parallelism_then_checkpoint(
    version: str, kind: str, tmp_path: Path
) -> None:
    sp = open_checkpoint(str(fixture(version, kind)))
    assert isinstance(sp, FlinkSavepoint)
    backends = [sp.keyed_backend("keyed-states", i, 3, states=STATES) for i in range(3)]
    for k in KEYS:
        backend = next(b for b in backends if b.key_group_range.start <= _kg(k) <= b.key_group_range.end)
        backend.set_current_key(k)
        assert backend.get_state(ValueStateDescriptor("v_long", Types.LONG())).value() == VALUES["v_long"](k)
        assert backend.get_state(ValueStateDescriptor("v_string", Types.STRING())).value() == VALUES[
            "v_string"
        ](k)
        pojo = Types.ROW_NAMED(["id", "name", "score"], [Types.LONG(), Types.STRING(), Types.DOUBLE()])
        assert backend.get_state(ValueStateDescriptor("v_pojo", pojo)).value() == tuple(
            VALUES["v_pojo"](k).values()
        )
        assert list(backend.get_list_state(ListStateDescriptor("l_long", Types.LONG())).get()) == LISTS[
            "l_long"
        ](k)
        m = backend.get_map_state(MapStateDescriptor("m_int_string", Types.INT(), Types.STRING()))
        assert dict(m.items()) == MAPS["m_int_string"](k)
        r = backend.get_reducing_state(ReducingStateDescriptor("r_sum", lambda a, b: a + b, Types.LONG()))
        assert r.get() == 2 * k
    storage = CheckpointStorage(str(tmp_path / "ours"), retain=1)
    pending = storage.begin()
    for i, backend in enumerate(backends):
        pending.write_keyed("keyed-states", backend, subtask=i, parallelism=3).result()
    pending.commit()
    ours = open_checkpoint(str(tmp_path / "ours"))
    restored = ours.keyed_backend("keyed-states", 0, 1)
    restored.set_current_key(7)
    assert restored.get_state(ValueStateDescriptor("v_long", Types.LONG())).value() == VALUES["v_long"](7)


def _kg(k: int) -> int:
    from flinkstate.state.keygroups.assignment import assign_to_key_group

    return assign_to_key_group(k, 128, Types.LONG())


def test_kryo_state_is_refused_by_name() -> None:
    sp = read_savepoint(str(fixture("2.3", "heap_canonical")))
    with pytest.raises(UnsupportedSerializerError, match="v_kryo"):
        sp.keyed_backend("keyed-states", 0, 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_operator_state_repartitioned(version: str) -> None:
    sp = read_savepoint(str(fixture(version, "heap_canonical")))
    backend = sp.operator_backend("operator-states", 0, 1)
    assert sorted(backend.get_list_state(ListStateDescriptor("op_list", Types.LONG())).get()) == [
        0,
        1,
        2,
        100,
        101,
        102,
    ]
    union = backend.get_union_list_state(ListStateDescriptor("op_union", Types.STRING()))
    assert sorted(union.get()) == ["s0", "s1"]
    rules = sp.operator_backend("broadcast", 0, 3).get_broadcast_state(
        MapStateDescriptor("rules", Types.STRING(), Types.LONG())
    )
    assert dict(rules.items()) == {f"r{i}": 7 * i for i in range(4)}
