"""The core without its extras: with PySpark, rocksdict, s3fs, typer, rich and matplotlib
unimportable, a script writes a checkpoint, restores it, writes a Flink savepoint, reads it
and a real Flink savepoint; each feature of an extra fails with ``[MISSING_EXTRA]`` naming it.
Runs in a subprocess whose import system refuses those modules."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "flink"

SCRIPT = """
import sys

BLOCKED = {"pyspark", "rocksdict", "s3fs", "typer", "rich", "matplotlib", "pandas"}


class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
        return None


sys.meta_path.insert(0, Refuse())
work, fixture = sys.argv[1], sys.argv[2]

from flinkstate.checkpoint import CheckpointStorage, open_checkpoint
from flinkstate.checkpoint.flink import read_savepoint, write_savepoint
from flinkstate.state import FlinkStateError, HeapKeyedStateBackend, RocksDBKeyedStateBackend, Types
from flinkstate.state import ValueStateDescriptor

backend = HeapKeyedStateBackend(key_type=Types.STRING(), max_parallelism=128)
count = backend.get_state(ValueStateDescriptor("count", Types.LONG()))
for user in ["alice", "bob", "alice", "ünï"]:
    backend.set_current_key(user)
    count.update((count.value() or 0) + 1)
storage = CheckpointStorage(work + "/chk")
pending = storage.begin()
pending.write_keyed("counter", backend)
pending.commit()
restored = open_checkpoint(work + "/chk").keyed_backend("counter", subtask=0, parallelism=1)
state = restored.get_state(ValueStateDescriptor("count", Types.LONG()))
got = {}
for user in ["alice", "bob", "ünï", "nobody"]:
    restored.set_current_key(user)
    got[user] = state.value()
assert got == {"alice": 2, "bob": 1, "ünï": 1, "nobody": None}, got
write_savepoint(open_checkpoint(work + "/chk"), work + "/flink", parallelism=2)
rows = read_savepoint(work + "/flink").keyed_state("counter", "count").to_pylist()
assert sorted((r["key"], r["value"]) for r in rows) == [("alice", 2), ("bob", 1), ("ünï", 1)], rows
assert read_savepoint(fixture).operators, "a real Flink savepoint reads"


def refused(action):
    try:
        action()
    except FlinkStateError as exc:
        return str(exc)
    raise AssertionError("no error")


def connector():
    import flinkstate.connector


def cli():
    import flinkstate.cli


for message, extra in [
    (refused(lambda: RocksDBKeyedStateBackend(work + "/db")), "rocksdb"),
    (refused(lambda: CheckpointStorage("s3://bucket/chk")), "s3"),
    (refused(connector), "spark"),
    (refused(cli), "cli"),
]:
    assert message.startswith("[MISSING_EXTRA]") and f"flinkstate[{extra}]" in message, message
    print("REFUSED", message)
print("CORE-OK")
"""


def test_the_core_reads_and_writes_without_extras_and_names_each_missing_one(tmp_path: Path) -> None:
    fixture = next(p for p in sorted(FIXTURES.iterdir()) if (p / "_metadata").is_file())
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), str(tmp_path), str(fixture)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "CORE-OK" in done.stdout, done.stdout + done.stderr[-4000:]
    assert done.stdout.count("REFUSED [MISSING_EXTRA]") == 4
