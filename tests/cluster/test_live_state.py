"""Live state on the standalone cluster: kept by the executor, not the Python worker, and each
subtask's task placed on the executor that kept it. Over runs on two executors, with a pause
longer than Spark keeps an idle Python worker: every placed subtask stays on its executor,
and there a RocksDB subtask starts warm (its kept DB reopened, nothing downloaded), the pause
included, and a heap subtask restores from the executor's cached files, with nothing
downloaded. One run prefers the other executor for each subtask: each moves, and downloads at
most what its new executor lacked. Outputs and state stay exact, and once the application
stops nothing of ours is left on the machine. (The exactness of plain runs on both backends
is checked here too: each run's output against the model, every retained checkpoint's state.)"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from support.cluster import StandaloneCluster

from .counting import committed_states_match
from .live_runs import LIVE_DRIVER, lacking

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _ours(paths: list[Path], since: float) -> list[str]:
    """Our working directories under the Workers' directories, or directly in ``/tmp``
    (``$TMPDIR``), made after ``since``."""
    found = [p for path in paths if path.is_dir() for p in path.rglob("flinkstate*")]
    found += (p for p in Path("/tmp").glob("flinkstate-*") if not p.name.startswith("flinkstate-tests-"))
    return sorted(str(p) for p in found if p.is_dir() and p.stat().st_mtime >= since)


def test_live_state_across_workers_executors_and_a_pause(
    spark_cluster: StandaloneCluster, s3_options: dict[str, Any], tmp_path: Path
) -> None:
    started = time.time()
    bucket, options = s3_options["bucket"], s3_options["options"]
    roots = {backend: f"s3://{bucket}/jobs/{backend}" for backend in ("heap", "rocksdb")}
    done = spark_cluster.run_driver(LIVE_DRIVER, json.dumps(roots), json.dumps(options),
                                    "run", "run", "swap", "pause", "run", "run",
                                    directory=tmp_path / "driver", timeout=900)  # fmt: skip
    assert done.returncode == 0, done.failure()
    runs: dict[str, list[dict[str, Any]]] = {"heap": [], "rocksdb": []}
    for line in done.lines("LIVE"):
        backend, data = line.split(" ", 1)
        runs[backend].append(json.loads(data))
    for backend, seen in runs.items():
        assert [r["run"] for r in seen] == [1, 2, 3, 4, 5], done.stdout
        assert seen[0]["starts"] == ["new", "new"]
        for i in range(1, len(seen)):
            now, before = seen[i], seen[i - 1]
            apart = len(set(before["executors"])) == 2  # both executors had a subtask to keep
            for subtask, start in enumerate(now["starts"]):
                stayed = now["executors"][subtask] == before["executors"][subtask]
                if apart:  # placed where it ran before, or (swap) where the other one ran
                    assert stayed == (now["step"] != "swap"), f"{backend} run {now['run']}: {now}"
                got = now["downloaded"][subtask]
                where = f"{backend} run {now['run']} subtask {subtask} ({start}, {got} B)"
                if stayed and backend == "rocksdb":
                    assert start == "warm" and got == 0, where
                elif stayed:
                    assert start in ("warm", "cached") and got == 0, where
                else:
                    assert start in ("cached", "cold") and 0 < got <= lacking(seen, i, subtask), where
        committed_states_match(roots[backend], options, [1, 2, 3, 4, 5])
    assert any(r["executors"][0] != r["executors"][1] for rs in runs.values() for r in rs)
    # where a task ran, as Spark names the executor, is one name for one executor
    names = {
        (e, loc)
        for rs in runs.values()
        for r in rs
        for e, loc in zip(r["executors"], r["locations"], strict=True)
    }
    assert len({e for e, _ in names}) == len({loc for _, loc in names}) == len(names) == 2, names
    assert all(loc.startswith("executor_127.0.0.1_") for _, loc in names), names
    # the application is over: Spark removed its local directories, and with them all of ours
    deadline = time.monotonic() + 30
    while True:
        left = _ours([d for w in spark_cluster.workers for d in (w.local_dir, w.work_dir)], started)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert left == []
