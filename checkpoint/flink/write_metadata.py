"""Flink's ``_metadata`` of version 3: the inverse of :mod:`.metadata` for what the savepoint
writer produces.

Version 3 (``MetadataV3Serializer``, which Flink 2.3 still restores) has no operator names
or uids and no ``CheckpointProperties`` trailer: magic, version, checkpoint id, master
states (none), then per operator its id (16 bytes), parallelism, max parallelism,
coordinator state (none) and per subtask: its index, managed and raw operator state (none:
int 0 each), the managed keyed state as a savepoint key-groups handle (tag 7: first key
group, key-group count, one long offset per group, the stream handle), the raw keyed state
(none) and two empty channel-state collections. A stream handle is inline (tag 1: name,
int length, bytes) or a file beside ``_metadata`` (tag 6: relative path, long size).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .metadata import MAGIC
from .operator_id import operator_id
from .output import Output

VERSION = 3
_NULL = 0
_BYTE_STREAM = 1
_RELATIVE_FILE = 6
_SAVEPOINT_KEY_GROUPS = 7


@dataclass(frozen=True)
class StreamOut:
    """A state stream: inline in ``_metadata`` (``inline``) or the file ``name`` beside it."""

    name: str
    size: int
    inline: bytes | None = None


@dataclass(frozen=True)
class SubtaskOut:
    """One subtask's managed keyed state: its key groups' offsets in ``stream``."""

    index: int
    first_key_group: int
    offsets: tuple[int, ...]
    stream: StreamOut


@dataclass(frozen=True)
class OperatorOut:
    uid: str
    parallelism: int
    max_parallelism: int
    subtasks: tuple[SubtaskOut, ...]


def _stream(out: Output, s: StreamOut) -> None:
    if s.inline is not None:
        out.u8(_BYTE_STREAM, "stream handle tag")
        out.utf(s.name, "byte stream name")
        out.sized(s.inline, "byte stream")
    else:
        out.u8(_RELATIVE_FILE, "stream handle tag")
        out.utf(s.name, "relative path")
        out.i64(s.size, "file size")


def _subtask(out: Output, st: SubtaskOut) -> None:
    out.i32(st.index, "subtask index")
    out.i32(0, "has managed operator state")
    out.i32(0, "has raw operator state")
    out.u8(_SAVEPOINT_KEY_GROUPS, "keyed state handle tag")
    out.i32(st.first_key_group, "first key group")
    out.i32(len(st.offsets), "key-group count")
    for offset in st.offsets:
        out.i64(offset, "key-group offset")
    _stream(out, st.stream)
    out.u8(_NULL, "raw keyed state handle tag")
    out.i32(0, "input channel state handles")
    out.i32(0, "result subpartition state handles")


def metadata_bytes(checkpoint_id: int, operators: Sequence[OperatorOut], where: str) -> bytes:
    """The ``_metadata`` file of a savepoint holding ``operators``."""
    out = Output(where)
    out.i32(MAGIC, "magic number")
    out.i32(VERSION, "metadata version")
    out.i64(checkpoint_id, "checkpoint id")
    out.i32(0, "master state count")
    out.i32(len(operators), "operator count")
    for op in operators:
        out.raw(operator_id(op.uid))
        out.i32(op.parallelism, "parallelism")
        out.i32(op.max_parallelism, "max parallelism")
        out.u8(_NULL, "coordinator state tag")
        out.i32(len(op.subtasks), "subtask count")
        for st in op.subtasks:
            _subtask(out, st)
    return bytes(out.buf)
