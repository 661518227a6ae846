"""The ``flink`` tier for offline edits: a savepoint our writer wrote, edited (an operator's uid
changed, a state removed, a state replaced from rows, an operator removed), restored by real
Flink 2.3 on both state backends under the new uid, every value compared with the model
edited by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from flink_restore import check_restored, compile_job, flink_lib, restore, spec_text
from write_model import WRITTEN, StateModel, build_checkpoint, model

from flinkstate.checkpoint import SavepointEdits
from flinkstate.checkpoint.flink import edit_savepoint, write_savepoint

pytestmark = [
    pytest.mark.flink,
    pytest.mark.skipif(
        flink_lib() is None, reason="needs $FLINK_VENV with apache-flink 2.3 (make test-flink)"
    ),
]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_flink_restores_an_edited_savepoint(tmp_path: Path, backend: str) -> None:
    lib = flink_lib()
    assert lib is not None
    classpath = compile_job(lib, tmp_path / "classes")
    args = WRITTEN["inline"]
    source = write_savepoint(build_checkpoint(str(tmp_path / "checkpoint")), str(tmp_path / "source"), **args)
    names = ["", "carol", "\U0001f600", "new \u00e9"]
    edits = (
        SavepointEdits()
        .rename_operator("by-name", "by-name-v2")
        .remove_state("by-name", "tags")
        .set_keyed_state("by-name", "count", pa.table({"key": names, "value": [7 * len(n) for n in names]}))
        .remove_operator("key-char")
    )
    edit_savepoint(source, str(tmp_path / "edited"), edits)
    models = model()
    del models["key-char"]
    by_name = models.pop("by-name")
    count = StateModel("VALUE", "INT", {n: 7 * len(n) for n in names})
    models["by-name-v2"] = replace(by_name, states={"count": count})
    parallelism = {uid: 2 for uid in models}
    max_parallelism = {uid: 128 for uid in models}
    spec = spec_text(parallelism, max_parallelism, models)
    lines = restore(classpath, backend, tmp_path / "edited", spec, tmp_path / "work")
    check_restored(lines, parallelism, max_parallelism, models)
    assert any(line.startswith("by-name-v2\t") for line in lines), "restored under the new uid"
