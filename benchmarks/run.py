"""Run the benchmarks: one JSON object per line (id, metric, value, unit, anchor,
anchor_value, ratio, goal, met). Usage: run.py [--only P1,P2] [--quick]."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from checkpoint_bench import BENCHMARKS as CHECKPOINT
from cluster_bench import BENCHMARKS as CLUSTER
from common import Result
from flink_bench import BENCHMARKS as FLINK
from flink_write_bench import BENCHMARKS as FLINK_WRITE
from incremental_bench import BENCHMARKS as INCREMENTAL
from native_bench import BENCHMARKS as NATIVE
from process_bench import BENCHMARKS as PROCESS
from rocksdb_bench import BENCHMARKS as ROCKSDB
from scale_bench import BENCHMARKS as SCALE
from spark_bench import BENCHMARKS as SPARK
from state_bench import BENCHMARKS as STATE
from ttl_bench import BENCHMARKS as TTL

ALL: dict[str, Callable[[bool], Iterator[Result]]] = {
    **STATE,
    **TTL,
    **CHECKPOINT,
    **SPARK,
    **ROCKSDB,
    **SCALE,
    **INCREMENTAL,
    **NATIVE,
    **FLINK,
    **FLINK_WRITE,
    **PROCESS,
    **CLUSTER,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", default="", help="comma-separated ids, e.g. P1,P3 (P6 runs P6-P8)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one run each")
    args = parser.parse_args()
    wanted = [i.strip().upper() for i in args.only.split(",") if i.strip()] or list(ALL)
    unknown = [i for i in wanted if i not in ALL]
    if unknown:
        parser.error(f"unknown benchmark ids {unknown}; known: {sorted(ALL)}")
    for bench_id in wanted:
        for result in ALL[bench_id](args.quick):
            result.emit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
