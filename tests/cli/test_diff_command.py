"""``flinkstate diff OLD NEW``: per state, the entries added, removed and changed (the job's
model says which), the change rows, exit 1 when they differ and 0 when not; a Flink savepoint
against its conversion; filters; errors."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ORDERS, USERS, Job, Run, model

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "rocksdb_canonical"


def _states(doc: dict[str, object]) -> dict[tuple[str, str], dict[str, object]]:
    return {(s["operator"], s["state"]): s for s in doc["states"]}  # type: ignore[attr-defined, index]


def test_two_checkpoints_of_a_root(job: Job, run: Run) -> None:
    """Checkpoints 1 and 3 differ in every value the model changes; operator state is equal."""
    out = run("diff", job.root, job.root, "--old-checkpoint-id", "1", "--json", *job.args, code=1)
    doc = json.loads(out.stdout)
    assert (
        not doc["identical"]
        and doc["old"].startswith("checkpoint 1")
        and doc["new"].startswith("checkpoint 3")
    )
    found = _states(doc)
    old, new = model(1), model(3)
    for state in ("count", "events", "totals", "seen"):
        s = found[("counter", state)]
        changed = sum(1 for k in old[state].keys() & new[state].keys() if old[state][k] != new[state][k])
        assert (s["added"], s["removed"], s["changed"]) == (0, 0, changed), state
        assert s["in"] == "both"
    count_rows = found[("counter", "count")]["rows"]
    assert {r["key"]: r["value"] for r in count_rows} == new["count"]  # type: ignore[union-attr]
    assert {r["change_type"] for r in count_rows} == {"update"}  # type: ignore[union-attr]
    events = found[("counter", "events")]["rows"]
    assert sum(r["change_type"] == "delete" for r in events) == len(USERS)  # type: ignore[union-attr]
    amount = found[("orders", "amount")]  # ROW keys
    assert (amount["added"], amount["removed"], amount["changed"]) == (0, 0, len(ORDERS))
    got = {(r["key"]["region"], r["key"]["id"]): r["value"] for r in amount["rows"]}  # type: ignore[union-attr]
    assert got == new["amount"]
    for state in ("offsets", "sources", "rules"):
        assert _states(doc)[("source", state)]["changed"] == 0 and not found[("source", state)]["rows"]


def test_a_checkpoint_with_itself_is_identical(local_job: Job, run: Run) -> None:
    out = run("diff", local_job.root, local_job.root, "--json")
    doc = json.loads(out.stdout)
    assert doc["identical"] and all(not s["rows"] for s in doc["states"])
    assert run("diff", local_job.root, local_job.root).stdout.rstrip().endswith("identical")


def test_keys_state_and_limit(local_job: Job, run: Run) -> None:
    root = local_job.root
    args = ["diff", root, root, "--old-checkpoint-id", "2", "--operator", "counter", "--state", "count"]
    doc = json.loads(run(*args, "--key", "ünï-😀", "--key", "hot", "--json", code=1).stdout)
    (only,) = doc["states"]
    assert (only["state"], only["changed"]) == ("count", 2)
    assert {r["key"]: r["value"] for r in only["rows"]} == {
        k: model(3)["count"][k] for k in ("ünï-😀", "hot")
    }
    limited = json.loads(run(*args, "--limit", "3", "--json", code=1).stdout)["states"][0]
    assert limited["changed"] == len(USERS) and len(limited["rows"]) == 3
    table = run(*args, "--limit", "2", code=1).stdout
    assert "the first 2" in table and "the snapshots differ" in table


def test_a_flink_savepoint_against_its_conversion(run: Run, tmp_path: Path) -> None:
    ours = str(tmp_path / "ours")
    operators = ("broadcast", "operator-states", "window-sum")
    run(
        "convert",
        str(FIXTURE),
        ours,
        "--to",
        "flinkstate",
        *(a for o in operators for a in ("--operator", o)),
    )
    for operator in operators:
        doc = json.loads(run("diff", str(FIXTURE), ours, "--operator", operator, "--json").stdout)
        assert doc["identical"] and doc["states"], operator
        assert doc["old"].startswith("Flink savepoint")


def test_errors(local_job: Job, run: Run, tmp_path: Path) -> None:
    root = local_job.root
    out = run("diff", root, root, "--key", "x", code=3)
    assert out.stderr.startswith("[INVALID_ARGUMENT]") and "--state" in out.stderr
    out = run("diff", root, root, "--operator", "nope", code=3)
    assert out.stderr.startswith("[UNKNOWN_STATE]")
    out = run("diff", root, str(tmp_path / "missing"), code=3)
    assert out.stderr.startswith("[CHECKPOINT_NOT_FOUND]")
    out = run("diff", root, root, "--state", "count", "--key-group", "999", code=3)
    assert out.stderr.startswith("[INVALID_OPTION]") and "do not exist" in out.stderr
