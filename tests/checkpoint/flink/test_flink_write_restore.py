"""The ``flink`` tier: savepoints our writer wrote, restored by real Flink 2.3 (a local
mini-cluster) on both state backends, every value compared with the model.

Runs only where ``$FLINK_VENV`` names a virtualenv holding ``apache-flink==2.3.0``
(``make test-flink``); each restore takes 20-60 s of CPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from flink_restore import compile_job, flink_lib, parse_lines, restore, spec_text
from write_model import build_checkpoint, rows

from flinkstate.checkpoint.flink import write_savepoint
from flinkstate.state.keygroups.assignment import compute_operator_index_for_key_group

pytestmark = [
    pytest.mark.flink,
    pytest.mark.skipif(
        flink_lib() is None, reason="needs $FLINK_VENV with apache-flink 2.3 (make test-flink)"
    ),
]

#: Rescaled from the source (parallelism 2, max parallelism 128); typed-values gets two-byte
#: key-group prefixes; state streams over 1 KiB go to files, smaller ones inline.
PARALLELISM = {"typed-values": 3, "by-name": 2}
MAX_PARALLELISM = {"typed-values": 256, "by-name": 128}


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    lib = flink_lib()
    assert lib is not None
    return compile_job(lib, tmp_path_factory.mktemp("restore-job"))


@pytest.fixture(scope="module")
def savepoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("written")
    source = build_checkpoint(str(work / "source"))
    target = work / "savepoint"
    write_savepoint(
        source, str(target), parallelism=PARALLELISM, max_parallelism=MAX_PARALLELISM, inline_threshold=1024
    )
    names = {p.name for p in target.iterdir()}
    assert "_metadata" in names and len(names) > 1, "expected both inline and file handles"
    return target


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_flink_restores_every_value(classpath: str, savepoint: Path, tmp_path: Path, backend: str) -> None:
    lines = restore(classpath, backend, savepoint, spec_text(PARALLELISM, MAX_PARALLELISM), tmp_path)
    got, placed = parse_lines(lines)
    assert len(lines) == len(got)
    assert got == {r[:5] for r in rows(live_only=True)}
    for uid, subtask, kg in placed:
        assert subtask == compute_operator_index_for_key_group(MAX_PARALLELISM[uid], PARALLELISM[uid], kg)
