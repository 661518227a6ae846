"""The change feed of native RocksDB checkpoints: the difference of each checkpoint's
entries from the checkpoint before's. Its rows applied to a restore of the checkpoint
before the range give a restore of the range's last (:mod:`feed_model`), also across a
switch from the Parquet format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from feed_model import applied, feed, kind_of, restored

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.connector.errors import ChangeFeedError
from flinkstate.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    RocksDBKeyedStateBackend,
    Types,
    ValueStateDescriptor,
)

VALUE = ValueStateDescriptor("value", Types.LONG())
LIST = ListStateDescriptor("list", Types.STRING())
MAP = MapStateDescriptor("map", Types.STRING(), Types.DOUBLE())
STATES = ("value", "list", "map")


def step(backend: Any, version: int) -> None:
    """Checkpoint ``version``'s writes: new keys, updates, clears, appends, map puts and removes."""
    for n in range(0, 300, 1 if version == 1 else 7 * version):
        key = f"k-{n}-ü"
        backend.set_current_key(key)
        if version > 1 and n % 3 == 0:
            backend.get_state(VALUE).clear()
            backend.get_partitioned_state(f"ns{n % 2}", MAP).remove("a")
            continue
        backend.get_state(VALUE).update(n * version)
        backend.get_list_state(LIST).add(f"{version}-{n}")
        backend.get_partitioned_state(f"ns{n % 2}", MAP).put_all({"a": n / 2, f"v{version}": -0.0})
        if version == 3 and n % 2:
            backend.get_list_state(LIST).clear()


def write(root: Path, tmp_path: Path, formats: list[str]) -> None:
    with RocksDBKeyedStateBackend(tmp_path / "db", Types.STRING()) as backend:
        for version, fmt in enumerate(formats, start=1):
            step(backend, version)
            storage = CheckpointStorage(str(root), retain=10, incremental=True, rocksdb_format=fmt)
            pending = storage.begin()
            pending.write_subtask("op", 0, 1, 128, keyed=backend)
            pending.commit()


@pytest.mark.parametrize(
    "formats",
    [["native"] * 4, ["parquet", "native", "native", "native"], ["native", "native", "parquet", "parquet"]],
)
def test_applied_changes_give_the_last_checkpoint(tmp_path: Path, formats: list[str]) -> None:
    root = tmp_path / "root"
    write(root, tmp_path, formats)
    for state in STATES:
        kind = kind_of(root, 4, state)
        for start in (2, 3, 4):
            rows = feed(root, state, start, 4)
            before = restored(root, start - 1).get(state, {})
            assert applied(kind, before, rows) == restored(root, 4).get(state, {}), (state, start)
        assert feed(root, state, 2, 2), state  # something changed at 2


def test_a_native_range_needs_the_checkpoint_before(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, tmp_path, ["native"] * 2)
    with pytest.raises(ChangeFeedError, match=r"\[CHANGE_FEED_UNAVAILABLE\].*natively.*not retained"):
        feed(root, "value", 1)
