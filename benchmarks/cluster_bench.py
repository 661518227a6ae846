"""P17: live state on a real cluster. A Spark standalone cluster on loopback (a Master and
two Workers of one core each, as the cluster test tier starts it), checkpoints on a loopback
S3 server (moto_server). Ten ``process`` runs of 20k records over a RocksDB state of 1M keys
(10M without ``--quick``), runs 4-6 each after a 65 s pause (longer than Spark keeps an idle
Python worker), then the same as a ``foreach_batch`` streaming query; the same runs over a
state a tenth the size (the slope); and the heap with Python workers never reused (every
run restores), 1% of the keys changed. Each run's figures come from its checkpoint's
properties (how each subtask started, what it downloaded, where it ran)."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common import Result

if TYPE_CHECKING:
    from support.cluster import StandaloneCluster

TESTS = str(Path(__file__).resolve().parents[1] / "tests")
HERE = str(Path(__file__).resolve().parent)
RUNS = 10
PAUSES = {4, 5, 6}
RECORDS = 20_000


class MotoServer:
    """A loopback S3 server with one bucket, for the benchmark's checkpoints (``tests/support/s3.py``)."""

    def __init__(self) -> None:
        _tests_on_path()
        from support.s3 import S3Server, new_bucket

        self.server = S3Server()
        self.endpoint = self.server.endpoint
        self.options = new_bucket(self.endpoint, "p17", key="bench", secret="bench")["options"]

    def stop(self) -> None:
        self.server.stop()


DRIVER = """
import json
sys.path.insert(0, {here!r})
import cluster_driver
mode, root, options, backend, keys, records, runs, pauses, work = sys.argv[1:]
args = (spark, root, json.loads(options), backend, int(keys), int(records), int(runs),
        set(json.loads(pauses)))
if mode == "batch":
    cluster_driver.batch_runs(*args)
elif mode == "stream":
    cluster_driver.stream_runs(*args, work)
else:
    cluster_driver.heap_restored(spark, root, json.loads(options), int(keys))
"""


def _drive(cluster: StandaloneCluster, s3: MotoServer, mode: str, name: str, keys: int, runs: int,
           pauses: set[int], work: Path,
           conf: dict[str, str] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """The driver's ``P17FILL``, ``P17RUN`` and ``P17HEAP`` lines, in that order."""
    args = (mode, f"s3://p17/{name}", json.dumps(s3.options), "rocksdb", str(keys), str(RECORDS), str(runs),
            json.dumps(sorted(pauses)), str(work / name))  # fmt: skip
    done = cluster.run_driver(
        DRIVER.format(here=HERE), *args, conf=conf, timeout=7200, directory=work / f"{name}-driver"
    )
    if done.returncode != 0:
        raise RuntimeError(f"P17 driver {name} failed: {done.failure()}")
    return [json.loads(line) for tag in ("P17FILL", "P17RUN", "P17HEAP") for line in done.lines(tag)]


def _tests_on_path() -> None:
    """The tests' set-ups (``tests/support``) import as ``support``, the cluster test tier's package
    (``tests/cluster``) as ``cluster``."""
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)


def _figures(runs: list[dict[str, Any]], label: str) -> Iterator[Result]:
    """Per-run lines, then the goals over the runs after the first (the fill is set-up)."""
    from cluster.live_runs import lacking

    for r in runs[1:]:
        starts = r["starts"]
        got = float(sum(r["downloaded"]))
        yield Result("P17", f"{label} run {r['run']}: {' '.join(starts)}", r["seconds"], "s",
                     "bytes downloaded", got, 0.0, "per-run record", None)  # fmt: skip
    later = runs[2:]
    starts = [s for r in later for s in r["starts"]]
    live = sum(s in ("warm", "cached") for s in starts) / len(starts)
    yield Result("P17", f"{label}: share of subtask-runs after the first warm or cached", live, "share",
                 "all of them", 1.0, live, ">= 0.95", live >= 0.95)  # fmt: skip
    warm = [r["seconds"] for r in runs[1:] if set(r["starts"]) == {"warm"}]
    median_all = statistics.median(r["seconds"] for r in later)
    if warm:
        median_warm = statistics.median(warm)
        ratio = median_all / median_warm
        yield Result("P17", f"{label}: median run after the first (pauses included)", median_all, "s",
                     "median of the all-warm runs", median_warm, ratio, "<= 1.3x", ratio <= 1.3)  # fmt: skip
    worst = 0.0
    for i in range(2, len(runs)):
        for subtask, got in enumerate(runs[i]["downloaded"]):
            need = lacking(runs, i, subtask)
            worst = max(worst, got / need if need else (math.inf if got else 0.0))
    what = f"{label}: bytes downloaded over those written since the executor last held the subtask (worst)"
    yield Result("P17", what, worst, "x", "files the executor lacked", 1.0, worst, "<= 2x",
                 worst <= 2.0)  # fmt: skip


def bench_p17(quick: bool) -> Iterator[Result]:
    _tests_on_path()
    from support.cluster import StandaloneCluster

    keys = 1_000_000 if quick else 10_000_000
    work = Path(tempfile.mkdtemp(prefix="flinkstate-p17-"))
    s3 = MotoServer()
    (work / "cluster").mkdir()
    cluster = StandaloneCluster(work / "cluster", workers=2)
    try:
        batch = _drive(cluster, s3, "batch", "batch", keys, RUNS, PAUSES, work)
        yield from _figures(batch, f"batch, {keys:,} keys")
        stream = _drive(cluster, s3, "stream", "stream", keys, RUNS, PAUSES, work)
        yield from _figures(stream, f"foreach_batch, {keys:,} keys")
        small = _drive(cluster, s3, "batch", "small", keys // 10, 5, set(), work)
        t_small = statistics.median(r["seconds"] for r in small[2:])
        t_large = statistics.median(r["seconds"] for r in batch[1:] if r["run"] not in PAUSES)
        slope = math.log(t_large / t_small) / math.log(10)
        yield Result("P17", f"log-log slope of a run's time, {keys // 10:,} -> {keys:,} keys", slope, "slope",
                     f"{keys // 10:,} keys: {t_small:.2f} s", t_small, t_large / t_small, "<= 0.2",
                     slope <= 0.2)  # fmt: skip
        heap_keys = keys // 10 if not quick else keys // 5
        (heap,) = _drive(cluster, s3, "heap", "heap", heap_keys, 0, set(), work,
                         conf={"spark.python.worker.reuse": "false"})  # fmt: skip
        full, after = heap["full"], heap["after"]

        def own(d: dict[str, Any]) -> int:
            return sum(size for fs in d["files"].values() for size, writer in fs if writer == d["checkpoint"])

        ratio = own(after) / own(full)
        yield Result("P17", f"heap, {heap_keys:,} keys, 1% changed, restored ({' '.join(after['starts'])}): "
                     "its checkpoint's bytes", float(own(after)), "B", "a full checkpoint's bytes",
                     float(own(full)), ratio, "<= 0.1x", ratio <= 0.1)  # fmt: skip
    finally:
        cluster.stop()
        s3.stop()
        shutil.rmtree(work, ignore_errors=True)


BENCHMARKS = {"P17": bench_p17}
