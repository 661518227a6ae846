"""The command line on native RocksDB checkpoints: ``inspect``, ``show``, ``skew`` read them
as they read the Parquet checkpoint of the same state; ``verify`` names a damaged SST
file; ``gc`` keeps the shared files a kept checkpoint references."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import MAX_P, P, Run, write_job

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.checkpoint.storage import Storage
from flinkstate.state import RocksDBKeyedStateBackend


def native_job(tmp_path: Path, versions: int) -> tuple[str, str]:
    """(Parquet root, native root): the job's checkpoint ``v`` restored into RocksDB and
    checkpointed natively, for v in 1..``versions``."""
    parquet, native = str(tmp_path / "parquet"), str(tmp_path / "native")
    write_job(parquet, {}, versions=versions)
    storage = CheckpointStorage(native, rocksdb_format="native", retain=10)
    for version in range(1, versions + 1):
        source = open_checkpoint(parquet, checkpoint_id=version)
        pending = storage.begin()
        backends: list[Any] = []
        try:
            for uid in ("counter", "orders"):
                for i in range(P):
                    path = tmp_path / f"db-{version}-{uid}-{i}"
                    factory = lambda **kw: RocksDBKeyedStateBackend(path, **kw)  # noqa: B023, E731
                    backends.append(source.keyed_backend(uid, i, P, factory))  # type: ignore[arg-type]
                    pending.write_subtask(uid, i, P, MAX_P, keyed=backends[-1],
                                          operator=source.operator_backend(uid, i, P))  # fmt: skip
            for i in range(P):
                pending.write_subtask("source", i, P, MAX_P, operator=source.operator_backend("source", i, P))
            pending.commit()
        finally:
            for b in backends:
                b.close()
    return parquet, native


def _states(run: Run, root: str) -> dict[str, Any]:
    doc = json.loads(run("inspect", root, "--json").stdout)
    return {s["state"]: s for op in doc["operators"] for s in op["states"]}


def test_inspect_show_skew_as_parquet(tmp_path: Path, run: Run) -> None:
    parquet, native = native_job(tmp_path, 1)
    a, b = _states(run, parquet), _states(run, native)
    assert a.keys() == b.keys()
    for name in ("count", "seen", "events", "totals", "amount"):
        assert a[name]["entries"] == b[name]["entries"] and a[name]["kind"] == b[name]["kind"], name
    assert b["count"]["files"] > 0 and b["count"]["bytes"] > 0
    for state in ("count", "events", "totals", "seen"):
        shown = [json.loads(run("show", r, "counter", state, "-f", "json").stdout) for r in (parquet, native)]
        rows = [
            sorted(json.dumps(row, sort_keys=True) for row in rs) for rs in shown
        ]  # the heap's order differs
        assert rows[0] == rows[1] != []
    skews = [
        json.loads(run("skew", root, "counter", "events", "--json").stdout) for root in (parquet, native)
    ]
    assert [s["entries"] for s in skews[0]["subtasks"]] == [s["entries"] for s in skews[1]["subtasks"]]


def test_verify_names_a_damaged_sst_file_and_gc_keeps_shared_ones(tmp_path: Path, run: Run) -> None:
    _, native = native_job(tmp_path, 3)
    assert json.loads(run("verify", native, "--all", "--json").stdout)["ok"]
    run("gc", native, "--retain", "1")
    assert json.loads(run("verify", native, "--json").stdout)["ok"]  # what the kept one references stayed
    manifest = open_checkpoint(native).manifest
    st = next(st for op in manifest.operators for st in op.subtasks if st.native is not None)
    assert st.native is not None
    sst = next(f for f in st.native.files if f.sst)
    storage = Storage(native)
    path = f"chk-3/{sst.ref.path}"
    data = bytearray(storage.read_bytes(path))
    data[len(data) // 2] ^= 0xFF
    storage.delete(path)
    storage.write_bytes(path, bytes(data))
    doc = json.loads(run("verify", native, "--json", code=1).stdout)
    assert not doc["ok"] and any(sst.ref.path.rsplit("/", 1)[1] in json.dumps(p) for p in doc["problems"])


def test_convert_and_rescale_read_a_native_checkpoint(tmp_path: Path, run: Run) -> None:
    parquet, native = native_job(tmp_path, 1)
    targets = [tmp_path / "flink-parquet", tmp_path / "flink-native"]
    for root, target in zip((parquet, native), targets, strict=True):
        run("convert", root, str(target), "--to", "flink", "--operator", "counter")
    from flinkstate.checkpoint.flink import read_savepoint

    a, b = (read_savepoint(str(t)) for t in targets)
    for i in range(P):
        x, y = a.keyed_backend("counter", i, P), b.keyed_backend("counter", i, P)
        assert _entries(y, "count")
        for state in ("count", "events", "totals", "seen"):
            assert sorted(map(repr, _entries(x, state))) == sorted(map(repr, _entries(y, state)))
    doc = json.loads(
        run("rescale", native, str(tmp_path / "rescaled"), "--max-parallelism", "64", "--json").stdout
    )
    rescaled = open_checkpoint(str(tmp_path / "rescaled"))
    assert rescaled.manifest.operator("counter") is not None and doc["operators"]
    assert all(st.native is None for op in rescaled.manifest.operators for st in op.subtasks)  # Parquet


def _entries(backend: Any, state: str) -> list[Any]:
    with backend.snapshot() as snap:
        return [e for kg in snap.key_group_range for e in snap.states[state].entries(kg)]
