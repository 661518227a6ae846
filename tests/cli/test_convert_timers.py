"""``flinkstate convert SRC DST --to flinkstate`` of a Flink savepoint with timers (Flink 1.20's
TimersJob, which records no uids): the timer queues are listed with the states, and the
checkpoint written holds every timer of the model in its key group."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Run
from flink_model import fixture
from timers_model import EVENT, OPERATORS, PROCESSING, model, our_timers

from flinkstate.checkpoint import CompletedCheckpoint, open_checkpoint


def test_convert_timers_to_ours(run: Run, tmp_path: Path) -> None:
    target = tmp_path / "ours"
    uids = [a for uid in OPERATORS for a in ("--uid", uid)]
    source = str(fixture("1.20", "timers_rocksdb"))
    doc = json.loads(run("convert", source, str(target), "--to", "flinkstate", *uids, "--json").stdout)
    listed = {o["uid"]: o["states"] for o in doc["operators"] if o["states"]}  # not the stateless ones
    assert listed == {uid: [EVENT, PROCESSING] for uid in OPERATORS}
    ours = open_checkpoint(str(target))
    assert isinstance(ours, CompletedCheckpoint)
    for uid in OPERATORS:
        assert our_timers(ours, uid) == model(uid)
    again = run("convert", source, str(target), "--to", "flinkstate", *uids, code=3)
    assert again.stderr.startswith("[CHECKPOINT_EXISTS]")
