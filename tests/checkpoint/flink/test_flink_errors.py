"""Truncated, altered and unknown Flink files give typed errors naming file, state and offset."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from flink_model import FIXTURES

from flinkstate.checkpoint.errors import CheckpointCorruptError, CheckpointNotFoundError
from flinkstate.checkpoint.flink import is_flink_savepoint, read_savepoint


def _copy(tmp_path: Path, kind: str) -> Path:
    target = tmp_path / kind
    shutil.copytree(FIXTURES / kind, target)
    return target


@pytest.mark.parametrize("cut", [3, 7, 20, 100, 300, 1000, -40])
def test_truncated_metadata(tmp_path: Path, cut: int) -> None:
    sp = _copy(tmp_path, "heap_canonical_files")
    data = (sp / "_metadata").read_bytes()
    end = cut if cut > 0 else len(data) + cut
    (sp / "_metadata").write_bytes(data[:end])
    with pytest.raises(CheckpointCorruptError, match=r"\[FLINK_FORMAT\].*_metadata.*byte offset \d+"):
        sp_obj = read_savepoint(str(sp))
        sp_obj.keyed_state("keyed-states", "v_long")


def test_not_a_flink_metadata(tmp_path: Path) -> None:
    sp = _copy(tmp_path, "heap_canonical")
    data = bytearray((sp / "_metadata").read_bytes())
    data[0] ^= 0xFF
    (sp / "_metadata").write_bytes(bytes(data))
    assert not is_flink_savepoint(str(sp))
    assert is_flink_savepoint(str(FIXTURES / "heap_canonical"))
    with pytest.raises(CheckpointCorruptError, match=r"\[FLINK_FORMAT\].*magic number"):
        read_savepoint(str(sp))


def test_unknown_metadata_version(tmp_path: Path) -> None:
    sp = _copy(tmp_path, "heap_canonical")
    data = bytearray((sp / "_metadata").read_bytes())
    data[7] = 99
    (sp / "_metadata").write_bytes(bytes(data))
    with pytest.raises(CheckpointCorruptError, match=r"unsupported metadata version 99 at byte offset 4"):
        read_savepoint(str(sp))


def test_missing_directory() -> None:
    with pytest.raises(CheckpointNotFoundError):
        read_savepoint("/nonexistent/flink/savepoint")


def _keyed_files(sp: Path) -> list[Path]:
    obj = read_savepoint(str(sp))
    op = obj.operator("keyed-states")
    return [
        sp / Path(s.managed_keyed.stream.name).name
        for s in op.subtasks
        if s.managed_keyed and s.managed_keyed.stream
    ]


@pytest.mark.parametrize("kind", ["heap_canonical_files", "heap_snappy", "rocksdb_canonical"])
def test_truncated_state_file(tmp_path: Path, kind: str) -> None:
    sp = _copy(tmp_path, kind)
    path = _keyed_files(sp)[0]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointCorruptError, match=rf"\[FLINK_FORMAT\].*{path.name}"):
        read_savepoint(str(sp)).keyed_state("keyed-states", "v_string")


def test_missing_state_file(tmp_path: Path) -> None:
    sp = _copy(tmp_path, "heap_canonical_files")
    path = _keyed_files(sp)[1]
    path.unlink()
    with pytest.raises(CheckpointCorruptError, match=rf"\[FLINK_FORMAT\].*{path.name}.*missing"):
        read_savepoint(str(sp)).keyed_state("keyed-states", "v_long")


def test_altered_entry_names_state_and_offset(tmp_path: Path) -> None:
    sp = _copy(tmp_path, "heap_canonical_files")
    obj = read_savepoint(str(sp))
    handle = next(s.managed_keyed for s in obj.operator("keyed-states").subtasks if s.managed_keyed)
    assert handle.stream is not None
    path = sp / Path(handle.stream.name).name
    data = bytearray(path.read_bytes())
    offset = next(o for o in handle.offsets if o)
    # state id (2 bytes), key length (4): the key's first byte is its key-group prefix.
    data[offset + 6] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(
        CheckpointCorruptError, match=r"state \S+, key group \d+: .*key-group prefix .*byte offset \d+"
    ):
        for state in ("l_string", "v_long", "v_string", "m_int_string", "v_pojo", "ttl_list"):
            read_savepoint(str(sp)).keyed_state("keyed-states", state)


def test_unknown_operator_and_state() -> None:
    sp = read_savepoint(str(FIXTURES / "heap_canonical"))
    with pytest.raises(CheckpointNotFoundError, match="no operator"):
        sp.keyed_state("nope", "v_long")
    with pytest.raises(CheckpointNotFoundError, match="no keyed state"):
        sp.keyed_state("keyed-states", "nope")
