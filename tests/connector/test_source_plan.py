"""One dispatch per read: schema() and reader() share one plan, and a checkpoint's ``_metadata``
is opened once per pass (Spark pickles the source from schema() to reader())."""

from __future__ import annotations

import pickle
from collections import Counter
from typing import Any

import pytest
from checkpoint_data import fill, subtask_backend
from flink_model import FIXTURES
from fsspec.implementations.local import LocalFileSystem

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.connector.read.changefeed.reader import ChangeFeedReader
from flinkstate.connector.read.checkpoint_reader import FlinkStateReader
from flinkstate.connector.read.savepoint_reader import FlinkSavepointReader
from flinkstate.connector.read.timer_reader import TimerReader
from flinkstate.connector.source import FlinkStateDataSource
from flinkstate.state import KeyGroupRange


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("plan") / "root")
    storage = CheckpointStorage(path, retain=5, incremental=True)
    backend = fill(subtask_backend(128, KeyGroupRange(0, 127)), range(50))
    for version in range(3):
        fill(backend, range(version, 50, 7), version)
        pending = storage.begin()
        pending.write_keyed("op", backend)
        pending.commit()
    return path


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each ``_metadata`` file is opened (every reader goes through fsspec's ``_open``;
    a failed open of one that does not exist is not counted)."""
    counts: Counter[str] = Counter()
    real = LocalFileSystem._open

    def counting(self: LocalFileSystem, path: str, *args: Any, **kwargs: Any) -> Any:
        f = real(self, path, *args, **kwargs)
        if path.endswith("/_metadata"):
            counts[path] += 1
        return f

    monkeypatch.setattr(LocalFileSystem, "_open", counting)
    return counts


def _cases(root: str) -> list[tuple[dict[str, str], type, int]]:
    """(options, the reader they dispatch to, the ``_metadata`` files a pass reads)."""
    flink = str(FIXTURES / "heap_canonical_files")
    return [
        ({"path": root}, FlinkStateReader, 1),
        ({"path": root, "operator": "op", "state": "value"}, FlinkStateReader, 1),
        ({"path": root + "/chk-2", "operator": "op", "state": "list"}, FlinkStateReader, 1),
        ({"path": root, "checkpointid": "1", "operator": "op", "state": "map"}, FlinkStateReader, 1),
        ({"path": root, "operator": "op", "timers": "true"}, TimerReader, 1),
        ({"path": flink, "operator": "keyed-states", "state": "v_long"}, FlinkSavepointReader, 1),
        ({"path": flink + "/_metadata"}, FlinkSavepointReader, 1),
        (  # the range 2..3, and the checkpoint before it: three manifests
            {"path": root, "operator": "op", "state": "value", "readchangefeed": "true",
             "changestartcheckpointid": "2"},
            ChangeFeedReader,
            3,
        ),
    ]  # fmt: skip


@pytest.mark.parametrize("pickled", [False, True], ids=["one-process", "pickled"])
def test_a_schema_and_reader_pass_opens_each_metadata_once(
    root: str, opened: Counter[str], pickled: bool
) -> None:
    for options, reader_type, files in _cases(root):
        opened.clear()
        source = FlinkStateDataSource(options)
        schema = source.schema()
        if pickled:  # Spark sends the source from schema()'s worker to reader()'s
            source = pickle.loads(pickle.dumps(source))
        reader = source.reader(schema)
        assert type(reader) is reader_type, options
        assert len(opened) == files and set(opened.values()) == {1}, (options, opened)


def test_reader_without_schema_plans_once(root: str, opened: Counter[str]) -> None:
    """A user-given schema skips schema(): reader() makes the plan, opening ``_metadata`` once."""
    from pyspark.sql.types import LongType, StructField, StructType

    source = FlinkStateDataSource({"path": root, "operator": "op", "state": "value"})
    reader = source.reader(StructType([StructField("key", LongType())]))
    assert isinstance(reader, FlinkStateReader) and sum(opened.values()) == 1
    assert reader.arrow_schema.names == ["key"]


def test_checkpoint_id_on_a_flink_savepoint_is_refused_naming_it() -> None:
    source = FlinkStateDataSource({"path": str(FIXTURES / "heap_canonical_files"), "checkpointid": "3"})
    with pytest.raises(ValueError, match="checkpoint_id is not supported when reading a Flink savepoint"):
        source.schema()
