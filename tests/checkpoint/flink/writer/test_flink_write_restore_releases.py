"""The ``flink`` tier per Flink release: the model checkpoint written for 2.3, 1.20, 1.17, 1.15 and 1.13
(``flink_version``) and restored by that release's Flink (a local mini-cluster) on both state
backends, every value compared with the model.

Each release runs where its installation is named (:func:`flink_restore.runtimes`):
``$FLINK_VENV`` (2.3), ``$FLINK120_VENV`` (1.20), ``$FLINK117_LIB``, ``$FLINK115_LIB`` and
``$FLINK113_LIB`` (1.17's, 1.15's and 1.13's jars); each
restore takes 20-60 s of CPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from flink_restore import FlinkRuntime, check_restored, compile_job, restore, runtimes, spec_text
from write_model import WRITTEN, build_checkpoint

from flinkstate.checkpoint import CompletedCheckpoint
from flinkstate.checkpoint.flink import write_savepoint

RUNTIMES = runtimes()
_ENV = {
    "2.3": "$FLINK_VENV",
    "1.20": "$FLINK120_VENV",
    "1.17": "$FLINK117_LIB",
    "1.15": "$FLINK115_LIB",
    "1.13": "$FLINK113_LIB",
}
pytestmark = pytest.mark.flink


@pytest.fixture(scope="module")
def model_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build_checkpoint(str(tmp_path_factory.mktemp("model") / "checkpoint"))


@pytest.fixture(scope="module", params=sorted(RUNTIMES))
def runtime(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[FlinkRuntime, str]:
    """A release's runtime and the restore job compiled against it (skipped where not installed)."""
    found = RUNTIMES[request.param]
    if found is None:
        pytest.skip(f"needs {_ENV[request.param]} for Flink {request.param} (make test-flink)")
    classes = tmp_path_factory.mktemp(f"restore-job-{found.version}")
    return found, compile_job(found.lib, classes, compat=found.compat)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_each_release_restores_what_was_written_for_it(
    runtime: tuple[FlinkRuntime, str], model_checkpoint: CompletedCheckpoint, tmp_path: Path, backend: str
) -> None:
    flink, classpath = runtime
    args = WRITTEN["mixed"]  # rescaled, streams inline and in files
    target = tmp_path / "savepoint"
    write_savepoint(model_checkpoint, str(target), flink_version=flink.version, **args)
    spec = spec_text(args["parallelism"], args["max_parallelism"])
    lines = restore(classpath, backend, target, spec, tmp_path / "work", jvm=flink.jvm)
    check_restored(lines, args["parallelism"], args["max_parallelism"])
