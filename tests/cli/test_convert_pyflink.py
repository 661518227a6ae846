"""``flinkstate convert --to flink --pyflink-mode``: keyed state written as PyFlink Python state."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

from conftest import Run

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.state import HeapKeyedStateBackend, Types, ValueStateDescriptor

KEYS = range(6)


def _checkpoint(path: Path) -> str:
    pending = CheckpointStorage(str(path)).begin()
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    for k in KEYS:
        backend.set_current_key(k)
        backend.get_state(ValueStateDescriptor("total", Types.LONG())).update(k * 10)
        backend.get_state(ValueStateDescriptor("seen", Types.PICKLED_BYTE_ARRAY())).update({"k": k})
    pending.write_keyed("py-op", backend, 0, 1)
    pending.commit()
    return str(path)


def test_convert_to_pyflink_process_mode(run: Run, tmp_path: Path) -> None:
    source = _checkpoint(tmp_path / "checkpoint")
    args = ["convert", source, str(tmp_path / "flink"), "--to", "flink", "--pyflink-mode", "process"]
    refused = run(*args, code=3)
    assert refused.stderr.startswith("[PICKLE_NOT_ALLOWED]")
    assert not (tmp_path / "flink").exists()
    doc = json.loads(run(*args, "--allow-pickle", "--json").stdout)
    assert doc["operators"][0]["states"] == ["python-state-seen", "python-state-total"]
    sp = read_savepoint(str(tmp_path / "flink"))
    totals = sp.python_state("py-op", "total", Types.LONG()).to_pylist()
    assert {r["key"]: r["value"] for r in totals} == {k: k * 10 for k in KEYS}
    seen = sp.python_state("py-op", "seen", Types.PICKLED_BYTE_ARRAY(), allow_pickle=True).to_pylist()
    assert {r["key"]: pickle.loads(r["value"]) for r in seen} == {k: {"k": k} for k in KEYS}


def test_convert_to_pyflink_thread_mode(run: Run, tmp_path: Path) -> None:
    source = _checkpoint(tmp_path / "checkpoint")
    target = str(tmp_path / "flink")
    run("convert", source, target, "--to", "flink", "--pyflink-mode", "thread", "--allow-pickle")
    states = {s.name: s for s in read_savepoint(target).states()}
    assert (states["total"].key_type, states["seen"].value_type) == ("ROW<f0 LONG>", "PRIMITIVE_ARRAY<BYTE>")


def test_convert_with_pickled_keys(run: Run, tmp_path: Path) -> None:
    """``--pickled-keys``: PyFlink's key is the key's pickle (``key_by`` without ``key_type``)."""
    source = _checkpoint(tmp_path / "checkpoint")
    target = str(tmp_path / "flink")
    args = ["convert", source, target, "--to", "flink", "--pickled-keys", "--allow-pickle"]
    assert run(*args, code=3).stderr.startswith("[INVALID_ARGUMENT] --pickled-keys needs --pyflink-mode")
    run(*args, "--pyflink-mode", "process")
    totals = read_savepoint(target).python_state("py-op", "total", Types.LONG()).to_pylist()
    assert {pickle.loads(r["key"]): r["value"] for r in totals} == {k: k * 10 for k in KEYS}
