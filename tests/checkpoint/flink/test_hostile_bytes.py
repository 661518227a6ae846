"""Hostile bytes in Flink's savepoints: the crashes a mutation hunt found, each at its byte, and a
short hunt over every committed fixture (``tests/support/hunt.py``; ``make fuzz`` runs a long one):
every read ends in its value or one of our errors, in bounded time and memory."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from flink_model import FIXTURES

from flinkstate.checkpoint.flink import FlinkFormatError, read_savepoint, write_savepoint
from flinkstate.checkpoint.flink.metadata.metadata_read import parse_metadata

HUNT = Path(__file__).resolve().parents[2] / "support" / "hunt.py"
OP_LIST = ("operator-states", "op_list")


def _copy(tmp_path: Path, kind: str) -> tuple[Path, bytearray]:
    target = tmp_path / kind.replace("/", "-")
    shutil.copytree(FIXTURES / kind, target)
    return target, bytearray((target / "_metadata").read_bytes())


def _offset_at(meta: bytes, name: str, mode: int) -> int:
    """Where the first element offset (an 8-byte long) of operator state ``name`` is in ``meta``:
    after its name (writeUTF), its mode byte and the offset count."""
    encoded = name.encode()
    at = meta.index(len(encoded).to_bytes(2, "big") + encoded + bytes([mode]))
    return at + 2 + len(encoded) + 1 + 4


def _stream_name_at(meta: bytes, path: Path) -> tuple[int, str]:
    """Where the name of the first operator state file of the savepoint at ``path`` is in ``meta``."""
    sp = read_savepoint(str(path))
    handle = next(s.managed_operator for o in sp.operators for s in o.subtasks if s.managed_operator)
    assert handle is not None and handle.stream is not None
    return meta.index(handle.stream.name.encode()), handle.stream.name


@pytest.mark.parametrize("kind", ["heap_canonical_files", "1.17/heap_canonical_files"])
def test_a_nul_byte_in_a_file_name_is_refused_when_metadata_is_read(tmp_path: Path, kind: str) -> None:
    """Was ``ValueError: embedded null byte`` from the filesystem's open."""
    path, meta = _copy(tmp_path, kind)
    at, _ = _stream_name_at(bytes(meta), path)
    meta[at + 3] = 0
    (path / "_metadata").write_bytes(bytes(meta))
    refused = r"\[FLINK_FORMAT\].*relative path '.*\\x00.*' is not a file name"
    with pytest.raises(FlinkFormatError, match=refused):
        read_savepoint(str(path))


def test_a_file_name_of_a_directory_is_a_typed_error(tmp_path: Path) -> None:
    """A handle naming a directory beside ``_metadata`` (was ``IsADirectoryError``)."""
    path, meta = _copy(tmp_path, "heap_canonical_files")
    _, name = _stream_name_at(bytes(meta), path)
    os.rename(path / name, path / "gone")
    (path / name).mkdir()
    with pytest.raises(FlinkFormatError, match=r"\[FLINK_FORMAT\].*cannot be read"):
        read_savepoint(str(path)).operator_state(*OP_LIST)


@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("past the end", r"offset 4294967295 is outside the state data \(bytes \d+ to \d+\)"),
        ("last byte", r"cannot deserialize a value of .* at byte \d+"),
        ("in the header", r"offset 10 is outside the state data"),
    ],
)
@pytest.mark.parametrize("kind", ["heap_canonical_files", "rocksdb_canonical", "1.17/rocksdb_canonical"])
def test_an_operator_state_offset_outside_its_element_is_a_typed_error(
    tmp_path: Path, kind: str, which: str, message: str
) -> None:
    """An offset past the stream (was ``struct.error: unpack_from requires a buffer of at least
    ...``), on its last byte (a long cut short: ``struct.error`` too) or inside the header."""
    path, meta = _copy(tmp_path, kind)
    at = _offset_at(bytes(meta), "op_list", 0)
    handle = read_savepoint(str(path)).operator(OP_LIST[0]).subtasks[0].managed_operator
    assert handle is not None and handle.stream is not None
    last = handle.stream.size
    low = {"past the end": 0xFFFFFFFF, "last byte": last - 1, "in the header": 10}[which]
    meta[at + 4 : at + 8] = low.to_bytes(4, "big")
    (path / "_metadata").write_bytes(bytes(meta))
    sp = read_savepoint(str(path))
    with pytest.raises(FlinkFormatError, match=message):
        sp.operator_state(*OP_LIST)
    with pytest.raises(FlinkFormatError, match=message):  # the savepoint writer carries the bytes
        write_savepoint(sp, str(tmp_path / "out"))


def test_a_negative_operator_state_offset_never_reads_from_the_end(tmp_path: Path) -> None:
    """A negative offset indexed the stream from its end: a wrong value, quietly."""
    path, meta = _copy(tmp_path, "heap_canonical_files")
    at = _offset_at(bytes(meta), "op_list", 0)
    meta[at : at + 8] = (-8).to_bytes(8, "big", signed=True)
    (path / "_metadata").write_bytes(bytes(meta))
    parsed = parse_metadata(bytes(meta), "m")
    assert any(-8 in e.offsets for o in parsed.operators for s in o.subtasks if s.managed_operator
               for e in s.managed_operator.states)  # fmt: skip
    with pytest.raises(FlinkFormatError, match=r"offset -8 is outside the state data"):
        read_savepoint(str(path)).operator_state(*OP_LIST)


SHARDS = (
    "heap_canonical,1.17/heap_canonical_files,1.20/heap_snappy,rocksdb_canonical,1.17/heap_checkpoint,"
    "sql_heap,1.20/sql_heap_checkpoint,pyflink",
    "heap_canonical_files,1.17/rocksdb_canonical,1.20/heap_canonical,heap_checkpoint,1.17/sql_rocksdb,"
    "1.20/pyflink,1.20/rocksdb_native,rocksdb_checkpoint",
)
"""The fixtures the short hunt mutates, in two processes of about equal time (a native savepoint's
reads cost ten times a canonical one's)."""


def _hunt(only: str, count: int, seed: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, str(HUNT), "--seed", str(seed), "--count", str(count), "--only", only, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_mutated_fixtures_end_in_their_value_or_a_typed_error() -> None:
    """A fixed-seed hunt: truncated, bit-flipped, spliced and length-inflated files of every
    kind of fixture; every read of every state a value or our error, within the time limit and
    the memory cap; checksummed files (SST, MANIFEST) never yield another value."""
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(_hunt, SHARDS, (500, 200), (11, 12)))
    findings = [f for r in results for f in r["findings"]]  # type: ignore[attr-defined]
    assert findings == []
    mutations: dict[str, int] = {}
    for r in results:
        for key, n in r["mutations"].items():  # type: ignore[attr-defined]
            mutations[key] = mutations.get(key, 0) + n
    formats = {k.split(":")[0] for k in mutations}
    assert {"_metadata", "keyed stream", "operator stream", "sst", "MANIFEST"} <= formats
    assert {k.split(":")[1] for k in mutations} == {"truncate", "bitflip", "splice", "inflate"}
    assert sum(mutations.values()) == 700


def test_an_inflated_key_group_count_of_a_native_handle_is_refused_before_allocating(tmp_path: Path) -> None:
    """An incremental handle's key-group count has no offsets after it to bound it: 2^31 built a
    tuple of 2^31 zeros (a ``MemoryError`` under the hunt's cap; found by ``make fuzz``)."""
    path, meta = _copy(tmp_path, "rocksdb_native")
    found = re.search(rb"\x00\x24[0-9a-f-]{36}\x00\x00\x00\x40\x00\x00\x00\x40", bytes(meta))
    assert found is not None  # subtask 1's handle: backend id, first key group 64, 64 groups
    meta[found.end() - 4 : found.end()] = b"\x7f\xff\xff\xff"
    (path / "_metadata").write_bytes(bytes(meta))
    with pytest.raises(FlinkFormatError, match=r"implausible key-group count 2147483647"):
        read_savepoint(str(path))


@pytest.mark.parametrize(
    "logical",
    [
        {"typeRoot": "DECIMAL", "scale": 2},  # a flipped bit renamed "precision" (make fuzz, seed 1)
        {"typeRoot": "DECIMAL", "precision": "10", "scale": 2},
        {"typeRoot": "TIMESTAMP_WITHOUT_TIME_ZONE", "precisioN": 3},
    ],
)
def test_a_sql_type_without_its_precision_is_flink_format(logical: dict[str, object]) -> None:
    from flinkstate.checkpoint.flink.types.rowdata_read import _logical

    with pytest.raises(FlinkFormatError, match="FLINK_FORMAT"):
        _logical(logical, "state 's'")
