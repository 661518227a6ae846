"""A native restore downloads its files ``DOWNLOADS`` at a time, largest first; a missing or
altered file is still ``[CHECKPOINT_CORRUPT]`` naming it, stops the other downloads and
leaves nothing behind to open."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from native_job import CLOCK, commit, comparable, fill, native_files, rocks

from flinkstate.checkpoint import CheckpointCorruptError, CheckpointStorage, CompletedCheckpoint, Storage
from flinkstate.checkpoint.reading import native as native_reading
from flinkstate.state import RocksDBKeyedStateBackend


class Watch:
    """Wraps ``Storage.open_input`` of native files: records the order they are opened in, how
    many are open at once (at most), and runs ``before`` on each open."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, before: Any = None) -> None:
        self.order: list[str] = []
        self.open = self.most = 0
        self.lock = threading.Lock()
        self.before = before
        real = Storage.open_input
        watch = self

        def open_input(storage: Storage, relative: str) -> Any:
            if "native" not in relative:
                return real(storage, relative)
            with watch.lock:
                watch.order.append(relative)
                watch.open += 1
                watch.most = max(watch.most, watch.open)
            try:
                if watch.before is not None:
                    watch.before(relative)
                raw = real(storage, relative)
            except BaseException:
                watch.closed()
                raise
            close = raw.close

            def closing() -> None:
                close()
                watch.closed()

            raw.close = closing
            return raw

        monkeypatch.setattr(Storage, "open_input", open_input)

    def closed(self) -> None:
        with self.lock:
            self.open -= 1


@pytest.fixture
def checkpoint(tmp_path: Path) -> tuple[CompletedCheckpoint, Any, CheckpointStorage]:
    """A native checkpoint of more files than downloads run at once, and its entries."""
    storage = CheckpointStorage(str(tmp_path / "root"), rocksdb_format="native")
    with rocks(tmp_path) as live:
        fill(live, range(600))
        done = commit(storage, live)
        model = comparable(live)
    [st] = done.manifest.operators[0].subtasks
    assert st.native is not None and len(st.native.files) > native_reading.DOWNLOADS + 2
    return done, model, storage


def test_files_download_concurrently_largest_first(
    tmp_path: Path, checkpoint: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    done, model, _ = checkpoint
    together = threading.Barrier(native_reading.DOWNLOADS, timeout=10)  # broken unless 4 run at once
    watch = Watch(monkeypatch, lambda path: together.wait() if len(watch.order) <= together.parties else None)
    with done.keyed_backend("op", 0, 1, lambda **kw: rocks(tmp_path, **kw), time_provider=CLOCK) as restored:
        assert comparable(restored) == model
    [st] = done.manifest.operators[0].subtasks
    assert st.native is not None
    by_size = sorted(st.native.files, key=lambda f: f.ref.size, reverse=True)
    assert sorted(watch.order) == sorted(f.ref.path for f in by_size)
    first = {f.ref.path for f in by_size[: native_reading.DOWNLOADS]}
    assert set(watch.order[: native_reading.DOWNLOADS]) == first
    assert watch.most == native_reading.DOWNLOADS and watch.open == 0


@pytest.mark.parametrize("damage", ["altered", "missing"])
def test_a_damaged_file_stops_the_other_downloads(
    tmp_path: Path, checkpoint: Any, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """The largest SST file damaged: the downloads running stop, those queued never start,
    the error comes once none runs, and no restore directory is left."""
    done, _, storage = checkpoint
    [st] = done.manifest.operators[0].subtasks
    assert st.native is not None
    largest = max((f for f in st.native.files if f.sst), key=lambda f: f.ref.size)
    path = next(p for p in native_files(storage) if largest.ref.path.endswith(p))
    if damage == "missing":
        storage.storage.delete(path)
    else:
        data = bytearray(storage.storage.read_bytes(path))
        data[len(data) // 2] ^= 0xFF
        storage.storage.delete(path)
        storage.storage.write_bytes(path, bytes(data))
    slow = threading.Event()  # never set: every other file is slow to open
    watch = Watch(monkeypatch, lambda p: None if p == largest.ref.path else slow.wait(1.0))
    target = tmp_path / "target"
    factory = lambda **kw: RocksDBKeyedStateBackend(target, **kw)  # noqa: E731
    name = path.rsplit("/", 1)[1]
    with pytest.raises(CheckpointCorruptError, match=rf"\[CHECKPOINT_CORRUPT\].*{name}.*{damage}"):
        done.keyed_backend("op", 0, 1, factory, time_provider=CLOCK)
    assert watch.open == 0  # raised once no download ran
    assert len(watch.order) <= native_reading.DOWNLOADS + 1 < len(st.native.files)
    assert not [n for n in os.listdir(target) if n.startswith("restore-")]
