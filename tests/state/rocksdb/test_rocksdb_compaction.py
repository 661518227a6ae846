"""Compaction options of the RocksDB backend: parsed once, refused when unknown, and
handed to RocksDB (its OPTIONS file says what the DB was opened with)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flinkstate.state import (
    FlinkStateError,
    RocksDBKeyedStateBackend,
    RocksDBOptions,
    Types,
    ValueStateDescriptor,
)


def test_compaction_options_parse_from_strings() -> None:
    opts = RocksDBOptions.from_mapping({"compaction_style": " Universal", "compaction_trigger": "12"})
    assert (opts.compaction_style, opts.compaction_trigger) == ("universal", 12)
    assert (RocksDBOptions().compaction_style, RocksDBOptions().compaction_trigger) == ("level", 4)


@pytest.mark.parametrize(
    "bad",
    [
        {"compaction_style": "fifo"},
        {"compaction_style": ""},
        {"compaction_style": 1},
        {"compaction_trigger": "0"},
        {"compaction_trigger": "many"},
    ],
)
def test_bad_compaction_options_are_refused(bad: dict[str, object]) -> None:
    name = next(iter(bad))
    with pytest.raises(FlinkStateError, match=rf"INVALID_OPTION.*{name}"):
        RocksDBOptions.from_mapping(bad)


def test_constructor_checks_the_style() -> None:
    with pytest.raises(FlinkStateError, match=r"INVALID_OPTION.*compaction_style"):
        RocksDBOptions(compaction_style="Level")
    with pytest.raises(FlinkStateError, match=r"INVALID_OPTION.*compaction_trigger"):
        RocksDBOptions(compaction_trigger=True)


def _options_file(path: Path) -> str:
    files = sorted(path.rglob("OPTIONS-*"))
    assert files, f"no OPTIONS file under {path}"
    return files[-1].read_text()


@pytest.mark.parametrize(
    ("style", "trigger", "expected"),
    [("level", 4, "kCompactionStyleLevel"), ("universal", 12, "kCompactionStyleUniversal")],
)
def test_options_reach_rocksdb(tmp_path: Path, style: str, trigger: int, expected: str) -> None:
    opts = RocksDBOptions(compaction_style=style, compaction_trigger=trigger)
    with RocksDBKeyedStateBackend(tmp_path / "db", options=opts, key_type=Types.LONG()) as b:
        state = b.get_state(ValueStateDescriptor("v", Types.LONG()))
        for k in range(100):
            b.set_current_key(k)
            state.update(k)
    text = _options_file(tmp_path / "db")
    # the state's column family, not only the default one, carries the options
    sections = text.split("[CFOptions ")
    assert len(sections) >= 3, "expected the default and the state's column family"
    for section in sections[1:]:
        assert f"compaction_style={expected}" in section
        assert f"level0_file_num_compaction_trigger={trigger}" in section


@pytest.mark.parametrize("partitioned", [True, False])
def test_partitioned_index_filters_reach_rocksdb(tmp_path: Path, partitioned: bool) -> None:
    opts = RocksDBOptions.from_mapping({"partitioned_index_filters": str(partitioned).lower()})
    assert opts.partitioned_index_filters is partitioned and RocksDBOptions().partitioned_index_filters
    with RocksDBKeyedStateBackend(tmp_path / "db", options=opts, key_type=Types.LONG()) as b:
        state = b.get_state(ValueStateDescriptor("v", Types.LONG()))
        for k in range(100):
            b.set_current_key(k)
            state.update(k)
    tables = _options_file(tmp_path / "db").split("[TableOptions/BlockBasedTable ")[1:]
    assert len(tables) >= 2, "expected the default and the state's column family"
    index = "kTwoLevelIndexSearch" if partitioned else "kBinarySearch"
    for table in tables:
        assert f"index_type={index}" in table
        assert f"partition_filters={str(partitioned).lower()}" in table
