"""``flinkstate edit`` on our checkpoints and on Flink savepoints, and ``convert --to
flinkstate``: what is written read back against the job's model, a dry run writes nothing,
bad edits exit 3 with their codes and write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
from conftest import Job, Run, model

from flinkstate.checkpoint import CompletedCheckpoint, open_checkpoint
from flinkstate.checkpoint.flink import FlinkSavepoint, operator_id_hex, read_savepoint
from flinkstate.state import Types, ValueStateDescriptor

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink"
EDITS = ["--rename-operator", "counter=counter-v2", "--remove-state", "counter/events",
         "--remove-operator", "orders", "--remove-state", "source/rules"]  # fmt: skip


def test_edit_our_checkpoint(job: Job, run: Run, tmp_path: Path) -> None:
    target = str(tmp_path / "edited") if not job.args else job.root.replace("/checkpoints", "/edited")
    doc = json.loads(run("edit", job.root, target, *EDITS, "-m", "64", "--json", *job.args).stdout)
    assert doc["format"] == "flinkstate" and doc["source_checkpoint_id"] == 3 and not doc["dry_run"]
    assert [(c["action"], c["operator"], c["state"]) for c in doc["changes"]] == [
        ("remove operator", "orders", ""),
        ("rename operator", "counter", ""),
        ("remove state", "counter", "events"),
        ("remove state", "source", "rules"),
        ("max parallelism", "counter", ""),
        ("max parallelism", "source", ""),
    ]
    edited = open_checkpoint(target, job.options)
    assert isinstance(edited, CompletedCheckpoint)
    ops = {op.uid: op for op in edited.manifest.operators}
    assert set(ops) == {"counter-v2", "source"}
    assert sorted(m.name for m in ops["counter-v2"].keyed_states) == ["count", "seen", "totals"]
    assert {i.name for i in ops["source"].operator_states} == {"offsets", "sources"}
    assert ops["counter-v2"].max_parallelism == 64
    want = model(3)
    backend = edited.keyed_backend("counter-v2", 0, 1)
    count = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
    got = {}
    for user in want["count"]:
        backend.set_current_key(user)
        got[user] = count.value()
    assert got == want["count"]
    again = run("edit", job.root, target, "--remove-operator", "orders", *job.args, code=3)
    assert again.stderr.startswith("[CHECKPOINT_EXISTS]")


def test_edit_dry_run_writes_nothing(local_job: Job, run: Run, tmp_path: Path) -> None:
    target = tmp_path / "edited"
    out = run("edit", local_job.root, str(target), *EDITS, "--dry-run").stdout
    assert out.startswith(f"would write savepoint {target} from checkpoint 3: 4 change(s)")
    assert "rename operator\tcounter\t\tcounter\tcounter-v2" in out, "plain lines off a terminal"
    assert "remove state\tcounter\tevents" in out
    assert not target.exists()


def test_edit_flink_savepoint(local_job: Job, run: Run, tmp_path: Path) -> None:
    flink = tmp_path / "flink"
    run(
        "convert",
        local_job.root,
        str(flink),
        "--to",
        "flink",
        "--operator",
        "counter",
        "--operator",
        "source",
    )
    target = tmp_path / "edited"
    args = ["--rename-operator", "counter=counter-v2", "--remove-state", "counter/events", "-m", "64"]
    doc = json.loads(run("edit", str(flink), str(target), *args, "--json").stdout)
    assert doc["format"] == "flink"
    sp = read_savepoint(str(target))
    assert {op.operator_id for op in sp.operators} == {
        operator_id_hex("counter-v2"),
        operator_id_hex("source"),
    }
    assert {op.max_parallelism for op in sp.operators} == {64}
    names = {s.name for s in sp.states() if s.operator_id == operator_id_hex("counter-v2")}
    assert names == {"count", "seen", "totals"}
    counts = {r["key"]: r["value"] for r in sp.keyed_state("counter-v2", "count").to_pylist()}
    assert counts == model(3)["count"]
    assert isinstance(open_checkpoint(str(target)), FlinkSavepoint)


def test_bad_edits_exit_3_and_write_nothing(local_job: Job, run: Run, tmp_path: Path) -> None:
    target = tmp_path / "edited"
    cases = {
        "UNKNOWN_OPERATOR": ["--remove-operator", "nope"],
        "UNKNOWN_STATE": ["--remove-state", "counter/nope"],
        "UID_COLLISION": ["--rename-operator", "counter=orders"],
        "INVALID_PARALLELISM": ["--max-parallelism", "1"],
        "INVALID_OPTION": ["--rename-operator", "counter"],
    }
    for code, args in cases.items():
        result = run("edit", local_job.root, str(target), *args, code=3)
        assert result.stderr.startswith(f"[{code}]"), (code, result.stderr)
        assert not target.exists()
    nothing = run("edit", local_job.root, str(target), code=3)
    assert nothing.stderr.startswith("[INVALID_OPTION] nothing to edit")


def test_convert_flink_savepoint_to_ours(run: Run, tmp_path: Path) -> None:
    fixture = FIXTURES / "heap_canonical"
    target = tmp_path / "ours"
    ops = ["--operator", "operator-states", "--operator", "broadcast"]
    doc = json.loads(run("convert", str(fixture), str(target), "--to", "flinkstate", *ops, "--json").stdout)
    assert {o["uid"]: o["states"] for o in doc["operators"]} == {
        "operator-states": ["op_list", "op_union"],
        "broadcast": ["rules"],
    }
    ours = open_checkpoint(str(target))
    source = read_savepoint(str(fixture))
    assert isinstance(ours, CompletedCheckpoint)
    for uid in ("operator-states", "broadcast"):
        for sub in range(2):
            got = sorted((d.name, repr(d.elements)) for d in ours.operator_backend(uid, sub, 2).snapshot())
            want = sorted((d.name, repr(d.elements)) for d in source.operator_backend(uid, sub, 2).snapshot())
            assert got == want
    back = tmp_path / "flink"
    run("convert", str(target), str(back), "--to", "flink")
    again = read_savepoint(str(back))
    for uid in ("operator-states", "broadcast"):
        for info in source.operator_infos(uid):
            for sub in range(2):
                assert again.operator_values(uid, info.name, sub) == source.operator_values(
                    uid, info.name, sub
                )


def test_convert_to_flinkstate_refusals(local_job: Job, run: Run, tmp_path: Path) -> None:
    fixture = FIXTURES / "heap_canonical"
    dry = run("convert", str(fixture), str(tmp_path / "d"), "--to", "flinkstate", "--operator", "broadcast",
              "--dry-run").stdout  # fmt: skip
    assert dry.startswith(f"would write savepoint {tmp_path / 'd'}") and not (tmp_path / "d").exists()
    assert not fsspec.filesystem("memory").find("/flinkstate-convert-dry-run")
    ours = run("convert", local_job.root, str(tmp_path / "x"), "--to", "flinkstate", code=3)
    assert ours.stderr.startswith("[UNSUPPORTED_FORMAT]")
    both = ["--operator", "window-sum", "--operator", "keyed-states"]  # window-sum converts, TTL does not
    ttl = run("convert", str(fixture), str(tmp_path / "t"), "--to", "flinkstate", *both, code=3)
    assert ttl.stderr.startswith("[FLINK_UNSUPPORTED] operator 'keyed-states', state 'ttl_")
    assert not (tmp_path / "t").exists()
    p = run("convert", str(fixture), str(tmp_path / "p"), "--to", "flinkstate", "-p", "2", code=3)
    assert p.stderr.startswith("[INVALID_OPTION] --parallelism")
