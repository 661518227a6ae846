"""The vectorized key-group path gives exactly what the general decoder gives."""

from __future__ import annotations

import struct

import pytest
from flink_model import CANONICAL, FIXTURES

from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.checkpoint.flink.reader.tables import keyed_table
from flinkstate.checkpoint.flink.streams.keyed_columns_read import block_columns
from flinkstate.checkpoint.flink.streams.keyed_read import KeyGroupDecoder, decode_groups
from flinkstate.state.serializers.lookup import serializer_for
from flinkstate.state.types.mapping import Types


@pytest.mark.parametrize("kind", CANONICAL)
@pytest.mark.parametrize("state", ["v_long", "v_int", "v_short", "v_double", "v_float", "v_string", "r_sum"])
def test_fast_equals_general(kind: str, state: str) -> None:
    sp = read_savepoint(str(FIXTURES / kind))
    fast_table = sp.keyed_state("keyed-states", state)
    op = sp.operator("keyed-states")
    for sub in op.subtasks:
        handle = sub.managed_keyed
        assert handle is not None and handle.stream is not None
        data = handle.stream.read(sp.directory)
        header = sp._keyed_stream(op, handle)[1]
        decoder = KeyGroupDecoder(header, 128, "test", [state, "l_long"])  # two states: general path
        assert decoder.columnar is None
        decode_groups(data, handle, header, decoder, None, "test")
        info = next(s for s in header.states if s.name == state)
        general = keyed_table(decoder.rows[info.state_id], header.key)
        part = fast_table.filter(
            fast_table.column("key_group").to_pandas().isin(list(handle.key_groups)).values
        )
        assert part.sort_by("key").equals(general.sort_by("key"))


def _block(kg: int, entries: list[tuple[int, str]]) -> bytes:
    text = serializer_for(Types.STRING())
    out = bytearray(struct.pack(">H", 0))
    for i, (key, value) in enumerate(entries):
        key_bytes = bytearray([kg]) + struct.pack(">q", key) + b"\x00"
        if i == len(entries) - 1:
            key_bytes[0] |= 0x80
        value_bytes = text.to_bytes(value)
        out += (
            struct.pack(">i", len(key_bytes)) + key_bytes + struct.pack(">i", len(value_bytes)) + value_bytes
        )
    return bytes(out + struct.pack(">H", 0xFFFF))


def test_ascii_strings_fast_and_others_fall_back() -> None:
    entries = [(5, "value-5"), (9, ""), (12, "x" * 100)]
    found = block_columns(_block(3, entries), 0, 3, 0, 1, 1, "LONG", "STRING")
    assert found is not None
    assert found[0].tolist() == [5, 9, 12] and found[1].to_pylist() == [v for _, v in entries]
    assert block_columns(_block(3, [(1, "caf\u00e9")]), 0, 3, 0, 1, 1, "LONG", "STRING") is None
    assert (
        block_columns(_block(3, [(1, "y" * 200)]), 0, 3, 0, 1, 1, "LONG", "STRING") is None
    )  # two-byte length
    assert block_columns(_block(3, entries), 0, 4, 0, 1, 1, "LONG", "STRING") is None  # wrong key group
