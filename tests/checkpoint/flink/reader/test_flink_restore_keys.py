"""Flink keyed state whose keys hash unlike ours (Tuple, Row) restored where lookups find it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from flink_model import FIXTURES

from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.checkpoint.flink.reader.restore import keyed_backend
from flinkstate.checkpoint.flink.streams.header_read import KeyedHeader, StateInfo
from flinkstate.checkpoint.flink.streams.keyed_read import StateRows
from flinkstate.checkpoint.flink.types.flink_type import FlinkType
from flinkstate.state import ListStateDescriptor, Types, ValueStateDescriptor, assign_to_key_group
from flinkstate.state.keygroups.hashing import murmur_hash

MAX_P = 128
TUPLE = Types.TUPLE([Types.LONG(), Types.LONG()])
KEYS = [(i, 7 * i - 40) for i in range(40)]


def _java_long(v: int) -> int:
    u = v & 0xFFFF_FFFF_FFFF_FFFF
    return (u ^ (u >> 32)) & 0xFFFF_FFFF


def _flink_group(key: tuple[int, ...]) -> int:
    """Flink's key group of a TupleN of Longs: ``result = 31 * result + Long.hashCode(field)``."""
    h = 0
    for field in key:
        h = (31 * h + _java_long(field)) & 0xFFFF_FFFF
    return murmur_hash(h) % MAX_P


class _TupleKeyed:
    """What the savepoint reader hands the restore: one VALUE state ``count`` keyed by a
    Tuple2<Long, Long>, each entry in the key group Flink stored it in."""

    directory = "tuple-keyed"

    def __init__(self) -> None:
        long = FlinkType("LongSerializerSnapshot", Types.LONG(), None)
        self.info = StateInfo(0, "count", "VALUE", None, long, None, long)
        key = FlinkType("TupleSerializerSnapshot", TUPLE, None)
        self.header = KeyedHeader(6, False, key, (self.info,), 0)

    def operator(self, name: str) -> Any:
        return SimpleNamespace(max_parallelism=MAX_P)

    def keyed_header(self, name: str) -> KeyedHeader:
        return self.header

    def decode_keyed(self, operator: str, state: str, key_groups: Any = None) -> StateRows:
        rows = StateRows(self.info)
        for i, key in enumerate(KEYS):
            group = _flink_group(key)
            if key_groups is None or group in set(key_groups):
                rows.add(group, key, None, None, 100 + i)
        return rows


def test_flink_groups_of_tuple_keys_are_not_ours() -> None:
    assert any(_flink_group(k) != assign_to_key_group(k, MAX_P, TUPLE) for k in KEYS)


@pytest.mark.parametrize("parallelism", [1, 3])
def test_tuple_keys_restore_where_lookups_find_them(parallelism: int) -> None:
    sp = cast(Any, _TupleKeyed())
    backends = [keyed_backend(sp, "op", i, parallelism) for i in range(parallelism)]
    desc = ValueStateDescriptor("count", Types.LONG())
    for i, key in enumerate(KEYS):
        (owner,) = [b for b in backends if assign_to_key_group(key, MAX_P, TUPLE) in b.key_group_range]
        owner.set_current_key(key)
        assert owner.get_state(desc).value() == 100 + i
    held = [k for b in backends for k in b.get_keys("count")]
    assert sorted(held) == sorted(KEYS)


@pytest.mark.parametrize("parallelism", [1, 3])
def test_pyflink_row_keys_restore_where_lookups_find_them(parallelism: int) -> None:
    """A real PyFlink savepoint: Python state keyed by Row(f0: Long), keys 0..9."""
    sp = read_savepoint(str(FIXTURES / "pyflink"))
    state = "python-state-py_long"
    header, info = sp.keyed_info("py-states", state) or (None, None)
    assert header is not None and info is not None
    backends = [sp.keyed_backend("py-states", i, parallelism, states=[state]) for i in range(parallelism)]
    desc = ListStateDescriptor(state, info.value.type_info)
    for k in range(10):
        key = (k,)
        group = assign_to_key_group(key, MAX_P, header.key.type_info)
        (owner,) = [b for b in backends if group in b.key_group_range]
        owner.set_current_key(key)
        assert len(list(owner.get_list_state(desc).get())) == 1
