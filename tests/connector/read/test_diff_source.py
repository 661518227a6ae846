"""Option diffAgainst: one state's changes between two snapshots, read through the data source
(its partitions read one by one, and by Spark), against the model (:mod:`diff_model`) and the
library's diff; options that do not apply are refused."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from diff_model import applied, contents, read_whole
from incremental_ops import Workload, checkpoint_now

from flinkstate.checkpoint import CheckpointStorage, DiffSettings, diff_state, open_side
from flinkstate.checkpoint.flink import import_savepoint, read_savepoint
from flinkstate.connector.errors import OptionError
from flinkstate.connector.options import ReadOptions
from flinkstate.connector.source import FlinkStateDataSource
from flinkstate.state import HeapKeyedStateBackend, Types
from flinkstate.state.ttl.time import ManualTimeProvider

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
KEYS = ["a", "ünï-😀", "", "Ω", "b", "c", "d"]


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Three incremental checkpoints of a random program (max parallelism 16)."""
    clock = ManualTimeProvider(0)
    backend = HeapKeyedStateBackend(key_type=Types.STRING(), max_parallelism=16, time_provider=clock)
    storage = CheckpointStorage(str(tmp_path_factory.mktemp("diff-source") / "root"), incremental=True)
    work = Workload(7, KEYS, clock)
    out = []
    for n in (150, 30, 30):
        work.run(backend, n)
        out.append(checkpoint_now(storage, backend).directory.url)
    return out


def _read(path: str, **options: str) -> list[dict[str, Any]]:
    source = pickle.loads(pickle.dumps(FlinkStateDataSource({"path": path, **options})))
    reader = source.reader(source.schema())
    reader = pickle.loads(pickle.dumps(reader))  # what travels to executors
    out = []
    for part in reader.partitions():
        for batch in reader.read(part):
            out += pa.Table.from_batches([batch]).to_pylist()
    return out


@pytest.mark.parametrize("state", ["value", "list", "map", "windows", "sum"])
def test_rows_are_the_librarys_and_the_models(chain: list[str], state: str) -> None:
    old, new = chain[0], chain[2]
    rows = _read(new, diffAgainst=old, operator="op", state=state, keyGroupsPerPartition="3")
    library = diff_state(open_side(old), open_side(new), "op", state, DiffSettings())
    assert sorted(map(repr, rows)) == sorted(repr(r) for t in library.rows for r in t.to_pylist())
    assert {r["checkpoint_id"] for r in rows} <= {3}
    before, after = (contents(read_whole(p, "op", state).to_pylist()) for p in (old, new))
    assert applied(before, rows) == after
    assert not _read(new, diffAgainst=new, operator="op", state=state)


def test_keys_key_groups_and_checkpoint_ids(chain: list[str]) -> None:
    root = chain[0].rsplit("/", 1)[0]
    every = _read(root, diffAgainst=root, diffAgainstCheckpointId="1", operator="op", state="map")
    assert every and {r["checkpoint_id"] for r in every} == {3}  # the root's latest
    keyed = _read(
        root,
        diffAgainst=root,
        diffAgainstCheckpointId="1",
        operator="op",
        state="map",
        keys='["ünï-😀", "a"]',
    )
    assert sorted(map(repr, keyed)) == sorted(repr(r) for r in every if r["key"] in ("ünï-😀", "a"))
    groups = {r["key_group"] for r in every}
    one = min(groups)
    picked = _read(chain[2], diffAgainst=chain[0], operator="op", state="map", keyGroups=str(one))
    assert picked and sorted(map(repr, picked)) == sorted(repr(r) for r in every if r["key_group"] == one)
    back = _read(root, checkpointId="1", diffAgainst=root, operator="op", state="map")
    assert {r["checkpoint_id"] for r in back} == {1}


def test_options_that_do_not_apply_are_refused() -> None:
    base = {"path": "/x", "operator": "op", "state": "s", "diffagainst": "/y"}
    for extra, message in (
        ({"readchangefeed": "true", "changestartcheckpointid": "1"}, "readChangeFeed"),
        ({"flatten": "false"}, "flatten=false"),
        ({"subtasks": "0"}, "subtasks"),
        ({"watermark": "5"}, "watermark"),
    ):
        with pytest.raises(
            OptionError, match=rf"\[INVALID_OPTION\].*{message}.*do not apply with diffAgainst"
        ):
            ReadOptions.parse({**base, **extra})
    with pytest.raises(OptionError, match=r"\['compareTtl'\] need option diffAgainst"):
        ReadOptions.parse({"path": "/x", "comparettl": "true"})
    with pytest.raises(OptionError, match="name it with options operator and state"):
        ReadOptions.parse({"path": "/x", "diffagainst": "/y"})
    parsed = ReadOptions.parse({**base, "comparettl": "true", "diffagainstcheckpointid": "4"}).diff
    assert parsed is not None and (parsed.against, parsed.checkpoint_id, parsed.compare_ttl) == (
        "/y",
        4,
        True,
    )


@pytest.mark.spark
def test_spark_diffs_a_flink_savepoint_and_our_checkpoints(
    spark: Any, chain: list[str], tmp_path: Path
) -> None:
    flink = str(FIXTURES / "rocksdb_canonical")
    ours = str(tmp_path / "ours")
    import_savepoint(read_savepoint(flink), ours, operators=["window-sum", "broadcast"])
    reader = spark.read.format("flinkstate").option("diffAgainst", ours)
    for operator, state in (("window-sum", "window-contents"), ("broadcast", "rules")):
        assert reader.option("operator", operator).option("state", state).load(flink).count() == 0
    df = (
        spark.read.format("flinkstate")
        .option("diffAgainst", chain[0])
        .option("operator", "op")
        .option("state", "list")
        .load(chain[2])
    )
    assert df.columns[-2:] == ["checkpoint_id", "change_type"]
    rows = [r.asDict() for r in df.collect()]
    before, after = (contents(read_whole(p, "op", "list").to_pylist()) for p in (chain[0], chain[2]))
    assert rows and applied(before, rows) == after
