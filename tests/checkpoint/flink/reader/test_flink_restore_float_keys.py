"""Flink MapState keyed and user-keyed by doubles, restored by the one rule for "the same
key" (Flink's: floats by bits, one NaN): the rows of one NaN key are one map, and ``0.0``
and ``-0.0`` stay two keys and two user keys, as in Flink."""

from __future__ import annotations

import math
import struct
from types import SimpleNamespace
from typing import Any, cast

import pytest

from flinkstate.checkpoint.flink.reader.restore import keyed_backend
from flinkstate.checkpoint.flink.streams.header_read import KeyedHeader, StateInfo
from flinkstate.checkpoint.flink.streams.keyed_read import StateRows
from flinkstate.checkpoint.flink.types.flink_type import FlinkType
from flinkstate.state import MapStateDescriptor, Types, assign_to_key_group

MAX_P = 2  # 0.0 and -0.0 share a key group
NAN_B = struct.unpack(">d", b"\x7f\xf8\x00\x00\x00\x00\x00\x00")[0]
# one row per map entry, as Flink's RocksDB savepoints hold them: (key, user key, value)
ENTRIES = [
    (float("nan"), 1.0, 1), (NAN_B, 2.0, 2), (-0.0, 0.0, 3), (-0.0, -0.0, 4), (0.0, -0.0, 5),
    (0.0, float("nan"), 6), (0.0, NAN_B, 7),
]  # fmt: skip


def bits(x: float) -> bytes:
    return b"\x7f\xf8" + bytes(6) if math.isnan(x) else struct.pack(">d", x)


class _DoubleKeyedMap:
    directory = "double-keyed"

    def __init__(self) -> None:
        double = FlinkType("DoubleSerializerSnapshot", Types.DOUBLE(), None)
        long = FlinkType("LongSerializerSnapshot", Types.LONG(), None)
        self.info = StateInfo(0, "m", "MAP", None, long, double, long)
        self.header = KeyedHeader(6, False, double, (self.info,), 0)

    def operator(self, name: str) -> Any:
        return SimpleNamespace(max_parallelism=MAX_P)

    def keyed_header(self, name: str) -> KeyedHeader:
        return self.header

    def decode_keyed(self, operator: str, state: str, key_groups: Any = None) -> StateRows:
        rows = StateRows(self.info)
        for key, user_key, value in ENTRIES:
            group = assign_to_key_group(key, MAX_P, Types.DOUBLE())
            if key_groups is None or group in set(key_groups):
                rows.add(group, key, None, user_key, value)
        return rows


@pytest.mark.parametrize("parallelism", [1, 2])
def test_float_keys_and_user_keys_restore_by_bits(parallelism: int) -> None:
    sp = cast(Any, _DoubleKeyedMap())
    backends = [keyed_backend(sp, "op", i, parallelism) for i in range(parallelism)]
    model: dict[bytes, dict[bytes, int]] = {}
    for key, user_key, value in ENTRIES:
        model.setdefault(bits(key), {})[bits(user_key)] = value
    desc = MapStateDescriptor("m", Types.DOUBLE(), Types.LONG())
    got: dict[bytes, dict[bytes, int]] = {}
    for b in backends:
        for key in list(b.get_keys("m")):
            b.set_current_key(key)
            got[bits(key)] = {bits(k): v for k, v in b.get_map_state(desc).items()}
    assert got == model
