"""The hunt for hostile bytes (``make fuzz SEED=1 COUNT=2000``): mutations of Flink's savepoint
fixtures (``tests/fixtures/flink``: every kind of each release) and of a small checkpoint of
ours, each read as a user reads it (:mod:`support.hostile`), under a memory cap. Prints the
mutations per file format and kind, the reads per reader and outcome, and every finding; exits
1 when there is one. ``--json`` prints the same as one JSON object (the mutation tests run a
short hunt this way, in a process of its own for the cap).

    python tests/support/hunt.py --seed 1 --count 2000 [--only heap_canonical,ours] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
for _folder in (TESTS, TESTS / "checkpoint", TESTS / "checkpoint" / "flink"):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))

from checkpoint_data import fill, operator_backend, subtask_backend  # noqa: E402
from flink_model import FIELDS_DDL, FIXTURES  # noqa: E402
from sql_model import RICH_DDL  # noqa: E402

from flinkstate.checkpoint import CheckpointStorage  # noqa: E402
from flinkstate.state import compute_key_group_range_for_operator_index  # noqa: E402
from support import hostile  # noqa: E402

OPAQUE = "STRUCT<value: BIGINT NOT NULL>"
PYFLINK = {"py_long": "BIGINT", "py_string": "STRING"}
"""PyFlink's states decoded by declaration (pickled ones are never loaded: allow_pickle trusts)."""


def fixture_types(kind: str) -> dict[str, str]:
    """The declared types the read tests give a fixture kind (Kryo classes, PyFlink states)."""
    if kind.startswith("sql"):
        return {"k_rich": RICH_DDL}
    if kind == "pyflink":
        return PYFLINK
    return {"v_kryo": OPAQUE, "v_kryo_fields": FIELDS_DDL}


def flink_subjects() -> list[hostile.Subject]:
    """Every committed fixture of every release (``written/`` is flinkstate's own output)."""
    out = []
    for version, folder in (("2.3", FIXTURES), ("1.20", FIXTURES / "1.20"), ("1.17", FIXTURES / "1.17")):
        for path in sorted(folder.iterdir()):
            if (path / "_metadata").is_file():
                name = path.name if version == "2.3" else f"{version}/{path.name}"
                out.append(hostile.flink_subject(name, path, fixture_types(path.name)))
    return out


def our_checkpoint(root: Path) -> Path:
    """A small checkpoint of ours: value, list and map state (some namespaced) of 40 keys and
    list, union and broadcast operator state, in two subtasks; returns its directory."""
    pending = CheckpointStorage(str(root)).begin()
    for i in range(2):
        rng = compute_key_group_range_for_operator_index(128, 2, i)
        pending.write_keyed("op", fill(subtask_backend(128, rng), range(40)), i, 2)
        pending.write_operator("op", operator_backend(i), i, 2)
    pending.commit()
    return next(root.glob("chk-*"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=2000, help="mutations in all, split evenly")
    parser.add_argument("--only", default="", help="subject names, comma-separated ('ours': our checkpoint)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        subjects = [*flink_subjects(), hostile.checkpoint_subject("ours", our_checkpoint(Path(tmp) / "ours"))]
        only = {s for s in args.only.split(",") if s}
        unknown = only - {s.name for s in subjects}
        if unknown:
            parser.error(f"unknown subjects {sorted(unknown)}; known: {[s.name for s in subjects]}")
        chosen = [s for s in subjects if not only or s.name in only]
        for subject in chosen:  # clean reads first: what they allocate is under the cap
            for read in subject.reads(str(subject.source), "_metadata"):
                hostile.run_bounded(read.run)
        hostile.cap_memory(hostile.MEMORY_CAP)
        tally = hostile.Tally()
        for n, subject in enumerate(chosen):
            share = args.count // len(chosen) + (n < args.count % len(chosen))
            hostile.hunt(subject, Path(tmp) / f"work{n}", share, args.seed + n, tally)
    if args.json:
        print(json.dumps(tally.as_json()))
    else:
        print(tally.report())
    return 1 if tally.findings else 0


if __name__ == "__main__":
    sys.exit(main())
