"""``flinkstate convert --to flink``: the job's operators as a Flink savepoint, every value
read back; a dry run writes nothing; what cannot be written is refused before any file."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
from conftest import MAX_P, Job, Run, model

from flinkstate.checkpoint.flink import operator_id_hex, read_savepoint
from flinkstate.checkpoint.flink.types.key_hash import java_hash_code
from flinkstate.state import Types
from flinkstate.state.keygroups.hashing import murmur_hash


def test_convert_to_flink(job: Job, run: Run, tmp_path: Path) -> None:
    target = str(tmp_path / "flink") if not job.args else job.root.replace("/checkpoints", "/flink")
    args = ["convert", job.root, target, "--to", "flink", "--operator", "counter", "--operator", "source"]
    doc = json.loads(run(*args, "-p", "3", "--json", *job.args).stdout)
    assert doc["source_checkpoint_id"] == 3 and not doc["dry_run"]
    found = {o["uid"]: o for o in doc["operators"]}
    assert set(found) == {"counter", "source"}
    assert found["counter"]["operator_id"] == operator_id_hex("counter")
    assert (found["counter"]["parallelism"], found["counter"]["max_parallelism"]) == (3, MAX_P)
    assert found["counter"]["states"] == ["count", "events", "seen", "totals"]
    assert found["source"]["states"] == ["offsets", "rules", "sources"]
    sp = read_savepoint(target, job.options)
    want = model(3)
    counts = sp.keyed_state("counter", "count").to_pylist()
    assert {r["key"]: r["value"] for r in counts} == want["count"]
    events: dict[str, list[str]] = {}
    for r in sorted(sp.keyed_state("counter", "events").to_pylist(), key=lambda r: r["position"]):
        events.setdefault(r["key"], []).append(r["value"])
    assert events == want["events"]
    again = run(*args, *job.args, code=3)
    assert again.stderr.startswith("[CHECKPOINT_EXISTS]")


def test_dry_run_writes_nothing(job: Job, run: Run, tmp_path: Path) -> None:
    target = tmp_path / "flink"
    out = run(
        "convert", job.root, str(target), "--to", "flink", "--operator", "counter", "--dry-run", *job.args
    )
    assert "would write Flink savepoint" in out.stdout and "count, events, seen, totals" in out.stdout
    assert not target.exists()
    memory = fsspec.filesystem("memory")
    assert not memory.find("/flinkstate-convert-dry-run"), "the dry run's copy in memory is dropped"


def test_unsupported_state_refused_before_any_file(run: Run, tmp_path: Path) -> None:
    """A heap checkpoint's Kryo state can be neither written nor carried as bytes."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "heap_checkpoint"
    target = tmp_path / "flink"
    result = run("convert", str(fixture), str(target), "--to", "flink", code=3)
    assert result.stderr.startswith("[FLINK_UNSUPPORTED]") and "'keyed-states'" in result.stderr
    assert "Kryo" in result.stderr
    assert not target.exists()


def test_row_keys_converted_in_flinks_key_groups(job: Job, run: Run, tmp_path: Path) -> None:
    """``orders`` is keyed by a named Row: each key lands in the group Flink's Row.hashCode() gives
    (a Flink savepoint does not keep a Row's field names: read back, they are f0, f1)."""
    target = tmp_path / "flink"
    run("convert", job.root, str(target), "--to", "flink", "--operator", "orders", *job.args)
    rows = read_savepoint(str(target)).keyed_state("orders", "amount").to_pylist()
    key_type = Types.ROW_NAMED(["region", "id"], [Types.STRING(), Types.INT()])
    found = {}
    for r in rows:
        key = tuple(r["key"].values())
        assert r["key_group"] == murmur_hash(java_hash_code(key, key_type)) % MAX_P
        found[key] = r["value"]
    assert found == model(3)["amount"]


def test_convert_a_flink_savepoint(run: Run, tmp_path: Path) -> None:
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "heap_canonical"
    target = tmp_path / "flink"
    ops = ["--operator", "operator-states", "--operator", "broadcast"]
    doc = json.loads(run("convert", str(fixture), str(target), "--to", "flink", *ops, "--json").stdout)
    assert {o["uid"]: o["states"] for o in doc["operators"]} == {
        "operator-states": ["op_list", "op_union"],
        "broadcast": ["rules"],
    }
    source, written = read_savepoint(str(fixture)), read_savepoint(str(target))
    for uid in ("operator-states", "broadcast"):
        for info in source.operator_infos(uid):
            for sub in range(2):
                assert written.operator_values(uid, info.name, sub) == source.operator_values(
                    uid, info.name, sub
                )
