"""The ``flink`` tier: savepoints our writer wrote, restored by real Flink 2.3 (a local
mini-cluster) on both state backends, every value compared with the model.

Runs only where ``$FLINK_VENV`` names a virtualenv holding ``apache-flink==2.3.0``
(``make test-flink``); each restore takes 20-60 s of CPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from flink_model import FIXTURES
from flink_restore import check_restored, compile_job, flink_lib, operator_state_models, restore, spec_text
from window_model import WINDOWS_JOB, WINDOWS_WRITTEN, expected_fired, flink_spec, parse_fired
from window_model import build_checkpoint as build_window_checkpoint
from write_model import WRITTEN, build_checkpoint

from flinkstate.checkpoint import CompletedCheckpoint
from flinkstate.checkpoint.flink import read_savepoint, write_savepoint
from flinkstate.state.keygroups.assignment import compute_operator_index_for_key_group

pytestmark = [
    pytest.mark.flink,
    pytest.mark.skipif(
        flink_lib() is None, reason="needs $FLINK_VENV with apache-flink 2.3 (make test-flink)"
    ),
]


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    lib = flink_lib()
    assert lib is not None
    return compile_job(lib, tmp_path_factory.mktemp("restore-job"))


@pytest.fixture(scope="module")
def model_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build_checkpoint(str(tmp_path_factory.mktemp("model") / "checkpoint"))


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_flink_restores_every_value(
    classpath: str, model_checkpoint: CompletedCheckpoint, tmp_path: Path, name: str, backend: str
) -> None:
    args = WRITTEN[name]
    target = tmp_path / "savepoint"
    write_savepoint(model_checkpoint, str(target), **args)
    spec = spec_text(args["parallelism"], args["max_parallelism"])
    lines = restore(classpath, backend, target, spec, tmp_path / "work")
    check_restored(lines, args["parallelism"], args["max_parallelism"])


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_flinks_own_savepoint_written_back(classpath: str, tmp_path: Path, backend: str) -> None:
    """Operator list, union and broadcast state of a savepoint Flink 2.3 wrote, read and written
    back (metadata version 3, the same operator ids), restored by Flink with every value."""
    source = read_savepoint(str(FIXTURES / "heap_canonical"))
    uids = ["operator-states", "broadcast"]
    write_savepoint(source, str(tmp_path / "savepoint"), operators=uids)
    models = operator_state_models(source, uids)
    parallelism = {u: source.operator(u).parallelism for u in uids}
    max_parallelism = {u: source.operator(u).max_parallelism for u in uids}
    spec = spec_text(parallelism, max_parallelism, models)
    lines = restore(classpath, backend, tmp_path / "savepoint", spec, tmp_path / "work")
    check_restored(lines, parallelism, max_parallelism, models)


@pytest.fixture(scope="module")
def windows_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    lib = flink_lib()
    assert lib is not None
    return compile_job(lib, tmp_path_factory.mktemp("restore-windows-job"), WINDOWS_JOB)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_flink_fires_restored_windows_and_timers(
    windows_classpath: str, tmp_path: Path, backend: str
) -> None:
    """Window contents in TimeWindow and GlobalWindow namespaces with their window timers, and a
    KeyedProcessFunction's event- and processing-time timers (our process runner's), written
    rescaled: Flink fires every window with its value and every timer at its time, each in the
    subtask owning its key group, and nothing else."""
    source = build_window_checkpoint(str(tmp_path / "source"))
    parallelism, max_parallelism = WINDOWS_WRITTEN["parallelism"], WINDOWS_WRITTEN["max_parallelism"]
    target = tmp_path / "savepoint"
    write_savepoint(source, str(target), **WINDOWS_WRITTEN)
    spec = flink_spec(parallelism, max_parallelism)
    lines = restore(windows_classpath, backend, target, spec, tmp_path / "work", "RestoreWindowsJob")
    fired = parse_fired(lines, parallelism, max_parallelism)
    assert len(fired) == len(set(fired))
    assert set(fired) == expected_fired()


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_flinks_own_window_savepoint_written_back(
    windows_classpath: str, tmp_path: Path, backend: str
) -> None:
    """The tumbling window operator of a savepoint Flink 2.3 wrote (TimeWindow reducing state and
    its window timers), read and written back rescaled: Flink fires each window with its value."""
    source = read_savepoint(str(FIXTURES / "heap_canonical"))
    parallelism, max_parallelism = {"window-sum": 3}, {"window-sum": 128}
    target = tmp_path / "savepoint"
    write_savepoint(
        source,
        str(target),
        operators=["window-sum"],
        parallelism=parallelism,
        max_parallelism=max_parallelism,
    )
    spec = "tumbling\twindow-sum\tSTRING\t3\t128\n"
    lines = restore(windows_classpath, backend, target, spec, tmp_path / "work", "RestoreWindowsJob")
    fired = [line.split("\t") for line in lines]
    contents = source.keyed_state("window-sum", "window-contents").to_pylist()
    expected = {
        (r["key"], f"{r['namespace']['start']},{r['namespace']['end']}", str(r["value"])) for r in contents
    }
    assert len(fired) == len(expected) > 10
    assert {(f[4], f[5], f[7]) for f in fired} == expected
    assert all(f[3] == "window" for f in fired)
    assert all(int(f[1]) == compute_operator_index_for_key_group(128, 3, int(f[2])) for f in fired)
