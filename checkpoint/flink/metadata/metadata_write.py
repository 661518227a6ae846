"""Flink's ``_metadata`` of version 3: the inverse of :mod:`.metadata_read` for what the savepoint
writer produces.

Version 3 (``MetadataV3Serializer``, which Flink 2.3 still restores) has no operator names
or uids and no ``CheckpointProperties`` trailer: magic, version, checkpoint id, master
states (none), then per operator its id (16 bytes), parallelism, max parallelism,
coordinator state (none) and per subtask: its index, the managed operator state (int 1 and a
partitionable handle: tag 4, per state its name, mode byte and element offsets, the stream
handle; or int 0), the raw operator state (int 0), the managed keyed state as a savepoint
key-groups handle (tag 7: first key group, key-group count, one long offset per group, the
stream handle; or tag 0), the raw keyed state (tag 0) and two empty channel-state
collections. A stream handle is inline (tag 1: name,
int length, bytes) or a file beside ``_metadata`` (tag 6: relative path, long size).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..wire.data_write import Output
from .metadata_read import MAGIC, OPERATOR_MODES

VERSION = 3
_NULL = 0
_BYTE_STREAM = 1
_OPERATOR_STATE = 4
_RELATIVE_FILE = 6
_SAVEPOINT_KEY_GROUPS = 7


@dataclass(frozen=True)
class OperatorStateEntryOut:
    """One state's entry in the operator state handle: its mode and offsets."""

    name: str
    mode: str  # SPLIT_DISTRIBUTE | UNION | BROADCAST
    offsets: tuple[int, ...]


@dataclass(frozen=True)
class StreamOut:
    """A state stream: inline in ``_metadata`` (``inline``) or the file ``name`` beside it."""

    name: str
    size: int
    inline: bytes | None = None


@dataclass(frozen=True)
class KeyedOut:
    """A subtask's managed keyed state: its key groups' offsets in ``stream`` (0: empty group)."""

    first_key_group: int
    offsets: tuple[int, ...]
    stream: StreamOut


@dataclass(frozen=True)
class OperatorStateOut:
    """A subtask's managed operator state: each state's offsets in ``stream``."""

    states: tuple[OperatorStateEntryOut, ...]
    stream: StreamOut


@dataclass(frozen=True)
class SubtaskOut:
    index: int
    keyed: KeyedOut | None
    operator: OperatorStateOut | None

    def streams(self) -> list[StreamOut]:
        return [h.stream for h in (self.keyed, self.operator) if h is not None]


@dataclass(frozen=True)
class OperatorOut:
    operator_id: bytes  # 16 bytes, as _metadata stores them
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


def _operator_state(out: Output, op: OperatorStateOut) -> None:
    out.u8(_OPERATOR_STATE, "operator state handle tag")
    out.i32(len(op.states), "operator state count")
    for entry in op.states:
        out.utf(entry.name, "operator state name")
        out.u8(OPERATOR_MODES.index(entry.mode), "distribution mode")
        out.i32(len(entry.offsets), "offset count")
        for offset in entry.offsets:
            out.i64(offset, "operator state offset")
    _stream(out, op.stream)


def _keyed(out: Output, keyed: KeyedOut) -> None:
    out.u8(_SAVEPOINT_KEY_GROUPS, "keyed state handle tag")
    out.i32(keyed.first_key_group, "first key group")
    out.i32(len(keyed.offsets), "key-group count")
    for offset in keyed.offsets:
        out.i64(offset, "key-group offset")
    _stream(out, keyed.stream)


def _subtask(out: Output, st: SubtaskOut) -> None:
    out.i32(st.index, "subtask index")
    out.i32(1 if st.operator is not None else 0, "has managed operator state")
    if st.operator is not None:
        _operator_state(out, st.operator)
    out.i32(0, "has raw operator state")
    if st.keyed is not None:
        _keyed(out, st.keyed)
    else:
        out.u8(_NULL, "keyed state handle tag")
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
        out.raw(op.operator_id)
        out.i32(op.parallelism, "parallelism")
        out.i32(op.max_parallelism, "max parallelism")
        out.u8(_NULL, "coordinator state tag")
        out.i32(len(op.subtasks), "subtask count")
        for st in op.subtasks:
            _subtask(out, st)
    return bytes(out.buf)
