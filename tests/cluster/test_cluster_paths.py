"""Newer Spark paths on the standalone cluster, in one application (:mod:`.paths_driver`), each
against a model held here: a ``diffAgainst`` read of two checkpoints (incremental, and across
max parallelisms) is the change rows a plain comparison of both checkpoints read whole gives;
Flink savepoints written with ``flinkVersion`` read back as written, in the format versions of
that release; the batch sink and the reader through the fault proxy either fail with an error
of ours or do exactly their job, and a failed write leaves the previous checkpoint whole."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest
from diff_model import read_whole
from support import s3
from support.cluster import StandaloneCluster

from flinkstate.checkpoint import CheckpointStorage, Storage, check_files, open_checkpoint
from flinkstate.checkpoint.flink import FlinkSavepoint, FlinkTarget, read_savepoint
from flinkstate.checkpoint.flink.streams.header_read import read_header
from flinkstate.checkpoint.flink.writer.flink_source import row_outer_versions

from .paths_driver import (
    DIFF_PAIRS,
    FAULT_MORE,
    FAULT_ROWS,
    FLINK_ROWS,
    FLINK_RULES,
    FLINK_VERSIONS,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

DRIVER = """
from cluster.paths_driver import drive
drive(spark, sys.argv[1:])
"""
CONF = {
    "spark.task.maxFailures": "2",  # a task a fault failed is retried once (4 only repeats an outage)
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
}
#: Release -> (operator state format, Row serializer snapshot outer version) it restores.
WANTED = {"1.17": (5, 4), "2.3": (6, 4)}


@pytest.fixture(scope="module")
def driven(spark_cluster: StandaloneCluster, s3_server: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The driver's sections (``DIFF``, ``FLINK``, ``FAULTS``) and the storage options of its bucket."""
    bucket = s3.new_bucket(s3_server)
    directory = tmp_path_factory.mktemp("paths-driver")
    done = spark_cluster.run_driver(DRIVER, s3_server, bucket["bucket"], conf=CONF, directory=directory,
                                    timeout=900)  # fmt: skip
    assert done.returncode == 0, done.failure()
    sections = {name: json.loads(done.lines(name)[0]) for name in ("DIFF", "FLINK", "FAULTS")}
    print({name: found["seconds"] for name, found in sections.items()})
    return sections, bucket["options"]


def _section(driven: Any, name: str) -> dict[str, Any]:
    found: dict[str, Any] = driven[0][name]
    assert "error" not in found, found["error"]
    return found


# -- diffAgainst ----------------------------------------------------------------------------


def _entries(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """A scope's entries, comparable: (position, user key, value) of each row."""
    return sorted((repr(r.get("position")), repr(r.get("user_key")), repr(r["value"])) for r in rows)


def _changes(
    old: Iterable[dict[str, Any]], new: Iterable[dict[str, Any]], state: str, checkpoint_id: int
) -> list[dict[str, Any]]:
    """The change rows from the old side's rows to the new one's, by a plain comparison of scopes: a
    scope gone is a ``delete`` (the old key group); a value added or changed an ``update``; a list or
    map added is its entries as ``update`` rows, changed a ``delete`` first."""
    sides: list[dict[tuple[Any, Any], list[dict[str, Any]]]] = [{}, {}]
    for side, rows in zip(sides, (old, new), strict=True):
        for row in rows:
            side.setdefault((row["key"], row["namespace"]), []).append(row)
    before, after = sides
    out = []
    for scope in before.keys() | after.keys():
        was, now = before.get(scope), after.get(scope)
        if was is not None and now is not None and _entries(was) == _entries(now):
            continue
        blank = {c: None for c in (was or now or [{}])[0]}
        if was is not None and (now is None or state != "value"):
            out.append({**blank, "key_group": was[0]["key_group"], "key": scope[0], "namespace": scope[1],
                        "change_type": "delete"})  # fmt: skip
        out += [{**row, "change_type": "update"} for row in now or []]
    return [{**row, "checkpoint_id": checkpoint_id} for row in out]


def _comparable(rows: Iterable[dict[str, Any]]) -> list[str]:
    return sorted(repr(sorted((k, v) for k, v in row.items() if k != "partition_")) for row in rows)


def test_a_diff_read_on_the_cluster_is_the_model(driven: Any) -> None:
    found = _section(driven, "DIFF")
    options = driven[1]
    partitions = set()
    for name, (old, old_id, new, new_id, states) in DIFF_PAIRS.items():
        for state in states:
            got = found["diffs"][f"{name}/{state}"]
            before = read_whole(
                found["roots"][old], "op", state, storage_options=options, checkpoint_id=old_id
            )
            after = read_whole(
                found["roots"][new], "op", state, storage_options=options, checkpoint_id=new_id
            )
            want = _changes(before.to_pylist(), after.to_pylist(), state, new_id)
            assert want, (name, state)  # the model has changes to find
            assert _comparable(got) == _comparable(want), (name, state)
            partitions |= {row["partition_"] for row in got}
    assert len(partitions) > 1  # read in several partitions, on the cluster's executors


# -- flinkVersion ---------------------------------------------------------------------------


def _stream_starts(sp: FlinkSavepoint, kind: str) -> list[bytes]:
    """Every subtask's ``kind`` (``keyed`` or ``operator``) state stream, each read whole."""
    out = []
    for op in sp.operators:
        for sub in op.subtasks:
            handle = sub.managed_keyed if kind == "keyed" else sub.managed_operator
            if handle is not None and handle.stream is not None:
                out.append(handle.stream.read(sp.directory, sp.storage))
    return out


def test_flink_savepoints_written_for_a_release_on_the_cluster(driven: Any) -> None:
    found = _section(driven, "FLINK")
    people = {user: {"f0": name, "f1": score} for user, name, score in FLINK_ROWS}  # no field names in Flink
    assert set(found) - {"seconds"} == set(FLINK_VERSIONS) == set(WANTED)
    for version in FLINK_VERSIONS:
        read = found[version]["person"]  # read back on the cluster
        assert {r["key"]: r["value"] for r in read} == people and len(read) == len(people), version
        sp = read_savepoint(found[version]["path"], driven[1])
        by_subtask: dict[int, set[tuple[str, str]]] = {}
        for row in sp.operator_state("op", "rules").to_pylist():
            by_subtask.setdefault(row["subtask"], set()).add((row["key"], row["value"]))
        assert by_subtask == {0: set(FLINK_RULES), 1: set(FLINK_RULES)}, version  # broadcast: a copy each
        target, (operator_format, row_outer) = FlinkTarget.of(version), WANTED[version]
        assert (target.operator_format, target.row_outer_version) == (operator_format, row_outer)
        assert sp.meta.version == 3
        operator, keyed = _stream_starts(sp, "operator"), _stream_starts(sp, "keyed")
        assert len(operator) == len(keyed) == 2
        assert {data[:4] for data in operator} == {operator_format.to_bytes(4)}, version
        assert {data[:4] for data in keyed} == {(6).to_bytes(4)}, version
        for data in keyed:
            assert row_outer_versions(data[: read_header(data, version).end]) == {row_outer}, version
        versions = sp.flink_versions
        assert target.release in versions.releases or target.release in versions.written_for, version
        assert versions.kryo == (2 if operator_format == 5 else None), version


# -- storage faults -------------------------------------------------------------------------


def _held(root: str, options: dict[str, Any]) -> list[list[Any]]:
    """The root's latest checkpoint's values, every file of every completed checkpoint verified."""
    for checkpoint_id in CheckpointStorage(root, options).completed_ids():
        directory = Storage(f"{root}/chk-{checkpoint_id}", options)
        refs = list(open_checkpoint(directory.url, options).manifest.files())
        assert check_files([(directory, ref) for ref in refs]) == [None] * len(refs), (root, checkpoint_id)
    return sorted(
        [r["key"], r["value"]] for r in read_whole(root, "op", "value", storage_options=options).to_pylist()
    )


def test_writes_and_reads_under_storage_faults_on_the_cluster(driven: Any) -> None:
    found = _section(driven, "FAULTS")
    options = driven[1]
    before, after = sorted(map(list, FAULT_ROWS)), sorted(map(list, FAULT_MORE))
    outcomes: dict[str, list[str]] = {"write": [], "read": []}
    for run in found["runs"]:
        name, outcome, where = run["operation"], run["outcome"], (run["operation"], run["faults"])
        if outcome != "ok":
            assert outcome["codes"], f"{where}: not an error of ours: {outcome['error']}"
        if run["faults"] == "None" or "outage=True" in run["faults"]:
            assert (outcome == "ok") == (run["faults"] == "None"), (where, outcome)
        held = _held(run["root"], options)
        if name == "write":
            assert held in (before, after), where  # the previous checkpoint, or the new one whole
            assert outcome != "ok" or held == after, where
        else:
            assert held == before, where
            assert outcome != "ok" or run["result"] == before, where  # never a quiet wrong answer
        outcomes[name].append("ok" if outcome == "ok" else ",".join(outcome["codes"]))
    assert all(len(runs) >= 4 for runs in outcomes.values()), outcomes
    assert sum(found["injected"].values()) > 0
    print(f"outcomes {outcomes}, injected {found['injected']}")
