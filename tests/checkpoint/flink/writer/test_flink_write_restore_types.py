"""The ``flink`` tier for types: savepoints with Tuple, Row (with and without field names) and
POJO keys, POJO values, Lists and Maps of POJOs and of Tuples/Rows, restored by real Flink 2.3
on both state backends; every value compared with the model and each key found by Flink in its
key group (a misplaced key is not found: its value would be missing).

Runs only where ``$FLINK_VENV`` names a virtualenv holding ``apache-flink==2.3.0``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from flink_restore import check_restored, compile_job, flink_lib, restore, spec_text
from types_model import TYPED_WRITES, types_model
from write_model import build_checkpoint

from flinkstate.checkpoint import CompletedCheckpoint
from flinkstate.checkpoint.flink import write_savepoint

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
def typed_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build_checkpoint(str(tmp_path_factory.mktemp("typed") / "checkpoint"), types_model())


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("name", sorted(TYPED_WRITES))
def test_flink_restores_typed_keys_and_values(
    classpath: str, typed_checkpoint: CompletedCheckpoint, tmp_path: Path, name: str, backend: str
) -> None:
    args = TYPED_WRITES[name]
    write_savepoint(typed_checkpoint, str(tmp_path / "savepoint"), **args)
    models = types_model()
    spec = spec_text(args["parallelism"], args["max_parallelism"], models)
    lines = restore(classpath, backend, tmp_path / "savepoint", spec, tmp_path / "work")
    check_restored(lines, args["parallelism"], args["max_parallelism"], models)
