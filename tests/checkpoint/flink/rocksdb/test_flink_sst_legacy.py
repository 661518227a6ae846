"""Flink 1.13's SST files (FRocksDB 5.17, in its retained incremental checkpoint): format_version 0
with the legacy footer, read as RocksDB does; format_version 1's footer over the same blocks too."""

from __future__ import annotations

import posixpath
from pathlib import Path

import pytest
from flink_model import KEYS, LISTS, fixture

from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.checkpoint.flink.errors import FlinkFormatError
from flinkstate.checkpoint.flink.rocksdb.sst_read import (
    LEGACY_MAGIC,
    MAGIC,
    MERGE,
    data_blocks,
    open_table,
    scan,
)

CHECKPOINT = fixture("1.13", "rocksdb_incremental")


def _l_long_sst() -> tuple[bytes, str]:
    """The bytes of subtask 0's l_long SST file (beside ``_metadata``: the handle's path is absolute)."""
    handle = read_savepoint(str(CHECKPOINT)).operator("keyed-states").subtasks[0].managed_keyed
    assert handle is not None
    for name, stream in handle.files:
        data = (Path(CHECKPOINT) / posixpath.basename(stream.name)).read_bytes()
        if name.endswith(".sst") and open_table(data, name).column_family == "l_long":
            return data, name
    raise AssertionError("no l_long SST file")


def test_flink_1_13_writes_format_version_0_with_the_legacy_footer() -> None:
    data, name = _l_long_sst()
    table = open_table(data, name)
    assert int.from_bytes(data[-8:], "little") == LEGACY_MAGIC
    assert (table.format_version, table.footer_size, table.checksum) == (0, 48, 1)
    assert {kind for _, _, kind, _ in scan(table)} == {MERGE}  # list state: merge operands
    rows = read_savepoint(str(CHECKPOINT)).keyed_state("keyed-states", "l_long").to_pylist()
    got: dict[int, list[int]] = {}
    for row in sorted(rows, key=lambda r: (r["key"], r["position"])):
        got.setdefault(row["key"], []).append(row["value"])
    assert got == {k: LISTS["l_long"](k) for k in KEYS}


def test_the_same_blocks_under_a_format_version_1_footer_read_alike() -> None:
    data, name = _l_long_sst()
    handles = data[-48:-8]  # the metaindex and index handles, padded
    version_1 = data[:-48] + b"\x01" + handles + (1).to_bytes(4, "little") + MAGIC.to_bytes(8, "little")
    table = open_table(version_1, name)
    assert (table.format_version, table.footer_size) == (1, 53)
    assert list(scan(table)) == list(scan(open_table(data, name)))


def test_an_altered_block_of_a_legacy_file_fails_its_crc32c() -> None:
    data, name = _l_long_sst()
    block = data_blocks(open_table(data, name))[0]
    altered = bytearray(data)
    altered[block.offset + 2] ^= 1
    with pytest.raises(FlinkFormatError, match=rf"{name}: data block checksum mismatch at byte offset"):
        list(scan(open_table(bytes(altered), name)))


@pytest.mark.parametrize("cut", [1, 8, 47, 60])
def test_a_cut_legacy_file_names_file_and_offset(cut: int) -> None:
    data, name = _l_long_sst()
    with pytest.raises(FlinkFormatError, match=rf"\[FLINK_FORMAT\] {name}: .*byte offset \d+"):
        list(scan(open_table(data[:-cut], name)))
