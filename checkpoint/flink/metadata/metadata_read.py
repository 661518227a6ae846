"""Flink's ``_metadata`` file: operators, their subtasks and state handles.

Layout (``MetadataV6Serializer`` and its bases, version 3 to 6): magic, version, checkpoint
id, master states, then per operator its name and uid (version 5 on), id, parallelism, max
parallelism, coordinator state and per subtask the managed/raw operator and keyed state
handles. The Java-serialized ``CheckpointProperties`` trailer (version 4 on) is only scanned
for the snapshot's type and format.

Keyed state handle tags: ``7`` a savepoint's key groups, ``3`` (Flink 1.13/1.14) and ``12``
(1.15+, with a handle id) a full checkpoint's (the heap backend's layout, or the canonical one
of a RocksDB full checkpoint of 1.13-1.15: :func:`..streams.keyed_read.decode_groups` tells
them apart), ``5``/``11`` an incremental (or native) RocksDB one.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import fsspec

from ..errors import FlinkFormatError
from ..wire.data_read import Cursor

MAGIC = 0x4960672D
_MASTER_MAGIC = 0xC96B1696 - (1 << 32)
SUPPORTED_VERSIONS = (3, 4, 5, 6)
OPERATOR_MODES = ("SPLIT_DISTRIBUTE", "UNION", "BROADCAST")
MAX_KEY_GROUPS = 1 << 15
"""Flink's upper bound of max parallelism: the most key groups a handle can have."""


@dataclass(frozen=True)
class StreamHandle:
    """Where a state stream's bytes are: inline (``data``) or in a file (``path``)."""

    kind: str  # "bytes" | "file" | "relative"
    name: str
    size: int
    data: bytes | None = None

    def read(
        self, directory: str, storage: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> bytes:
        """The stream's bytes (only the first ``limit`` with a limit); ``directory`` is the one
        holding ``_metadata``.

        Absolute paths point where the savepoint was written; a moved savepoint holds the
        same file name beside its ``_metadata``, which is read when the original is gone.
        """
        if self.data is not None:
            return self.data if limit is None else self.data[:limit]
        fs, root = fsspec.core.url_to_fs(directory, **dict(storage or {}))
        if self.kind == "relative":
            path = f"{root.rstrip('/')}/{self.name}"
        else:
            path = f"{root.rstrip('/')}/{posixpath.basename(self.name)}"
            original = self.name[len("file:") :] if self.name.startswith("file:") else None
            if original is not None and fs.protocol in ("file", ("file", "local")) and not fs.exists(path):
                path = "/" + original.lstrip("/")
        try:
            with fs.open(path, "rb") as f:
                data: bytes = f.read() if limit is None else f.read(limit)
        except FileNotFoundError as exc:
            raise FlinkFormatError(f"state file {path} (handle {self.name}) is missing") from exc
        except OSError as exc:  # a directory, a name the filesystem refuses
            raise FlinkFormatError(f"state file {path} (handle {self.name}) cannot be read: {exc}") from exc
        if len(data) != (self.size if limit is None else min(limit, self.size)) and self.kind != "bytes":
            raise FlinkFormatError(f"state file {path} has {len(data)} bytes, _metadata says {self.size}")
        return data


@dataclass(frozen=True)
class KeyedHandle:
    """A keyed state handle: a key-group range with one offset per group in one stream."""

    first_key_group: int
    offsets: tuple[int, ...]
    stream: StreamHandle | None
    kind: str = "key_groups"  # "key_groups" (canonical), "heap_checkpoint" or "incremental"
    files: tuple[tuple[str, StreamHandle], ...] = ()

    @property
    def key_groups(self) -> range:
        return range(self.first_key_group, self.first_key_group + len(self.offsets))


@dataclass(frozen=True)
class OperatorStateEntry:
    name: str
    mode: str
    offsets: tuple[int, ...]


@dataclass(frozen=True)
class OperatorHandle:
    states: tuple[OperatorStateEntry, ...]
    stream: StreamHandle | None


@dataclass(frozen=True)
class SubtaskState:
    index: int
    managed_operator: OperatorHandle | None
    raw_operator: OperatorHandle | None
    managed_keyed: KeyedHandle | None
    raw_keyed: KeyedHandle | None


@dataclass(frozen=True)
class OperatorMeta:
    name: str
    uid: str
    operator_id: str
    parallelism: int
    max_parallelism: int
    subtasks: tuple[SubtaskState, ...] = field(default_factory=tuple)
    finished: bool = False


@dataclass(frozen=True)
class CheckpointMeta:
    version: int
    checkpoint_id: int
    operators: tuple[OperatorMeta, ...]
    savepoint: bool  # from the CheckpointProperties trailer
    native: bool  # a NATIVE-format savepoint


_JAVA_STREAM = b"\xac\xed\x00\x05"
# CheckpointProperties always ends with an enum constant: a savepoint's post-checkpoint
# action or a checkpoint's file-sharing strategy.
_TRAILER_ENDS = (b"NONE", b"SUSPEND", b"TERMINATE", b"FORWARD_BACKWARD", b"FORWARD", b"NO_SHARING")


def _trailer(c: Cursor) -> tuple[bool, bool]:
    """(is a savepoint, is native) from the Java-serialized CheckpointProperties trailer."""
    at = c.pos
    tail = c.buf[at:]
    if not tail.startswith(_JAVA_STREAM) or b"CheckpointProperties" not in tail:
        raise c.fail("missing CheckpointProperties after the operators", at)
    if not any(tail.endswith(b"t" + len(e).to_bytes(2, "big") + e) for e in _TRAILER_ENDS):
        raise c.fail("truncated CheckpointProperties", len(c.buf))
    savepoint = b"SavepointType" in tail
    return savepoint, savepoint and b"t\x00\x06NATIVE" in tail


def _stream(c: Cursor) -> StreamHandle | None:
    at = c.pos
    tag = c.u8("stream handle tag")
    if tag == 0:
        return None
    if tag == 1:
        name = c.utf("byte stream name")
        data = c.take(c.count("byte stream length"), "byte stream")
        return StreamHandle("bytes", name, len(data), data)
    if tag == 2:
        size = c.i64("file size")
        return StreamHandle("file", _file_name(c, "file path", "\x00"), size)
    if tag == 6:
        rel = _file_name(c, "relative path", "\x00/")  # Flink's is the file's name alone
        return StreamHandle("relative", rel, c.i64("file size"))
    raise c.fail(f"unknown stream handle tag {tag}", at)


def _file_name(c: Cursor, what: str, refused: str) -> str:
    """A path in a stream handle: not empty, none of the ``refused`` characters."""
    at = c.pos
    name = c.utf(what)
    if not name or any(ch in name for ch in refused) or name in (".", ".."):
        raise c.fail(f"{what} {name!r} is not a file name", at)
    return name


def _keyed(c: Cursor) -> KeyedHandle | None:
    at = c.pos
    tag = c.u8("keyed state handle tag")
    if tag == 0:
        return None
    if tag in (3, 7, 12):
        first = c.i32("first key group")
        n = c.count("key-group count", 8)
        offsets = tuple(c.i64("key-group offset") for _ in range(n))
        stream = _stream(c)
        if tag == 12:
            c.utf("state handle id")
        if tag in (3, 12):
            return KeyedHandle(first, offsets, stream, "heap_checkpoint")
        return KeyedHandle(first, offsets, stream)
    if tag in (5, 11):
        c.i64("checkpoint id")
        c.utf("backend id")
        first = c.i32("first key group")
        at = c.pos
        n = c.count("key-group count", 0)
        if n > MAX_KEY_GROUPS:  # no offsets follow to bound it by the bytes left
            raise c.fail(f"implausible key-group count {n}", at)
        if tag == 11:
            c.i64("checkpointed size")
        meta = _stream(c)
        files = [*_stream_map(c), *_stream_map(c)]
        if tag == 11:
            c.utf("state handle id")
        return KeyedHandle(first, (0,) * n, meta, "incremental", tuple(files))
    raise c.fail(f"unknown keyed state handle tag {tag}", at)


def _stream_map(c: Cursor) -> list[tuple[str, StreamHandle]]:
    out = []
    for _ in range(c.count("file count")):
        name = c.utf("local file name")
        handle = _stream(c)
        if handle is None:
            raise c.fail(f"no stream for RocksDB file {name}")
        out.append((name, handle))
    return out


def _operator_handle(c: Cursor) -> OperatorHandle:
    at = c.pos
    tag = c.u8("operator state handle tag")
    if tag != 4:
        raise c.fail(f"unknown operator state handle tag {tag}", at)
    states = []
    for _ in range(c.count("operator state count")):
        name = c.utf("operator state name")
        mode = c.u8("distribution mode")
        if mode >= len(OPERATOR_MODES):
            raise c.fail(f"unknown distribution mode {mode} of operator state {name}", c.pos - 1)
        offsets = tuple(c.i64("operator state offset") for _ in range(c.count("offset count", 8)))
        states.append(OperatorStateEntry(name, OPERATOR_MODES[mode], offsets))
    return OperatorHandle(tuple(states), _stream(c))


def _subtask(c: Cursor, index: int) -> SubtaskState:
    managed_op = _operator_handle(c) if c.i32("has managed operator state") else None
    raw_op = _operator_handle(c) if c.i32("has raw operator state") else None
    managed_keyed = _keyed(c)
    raw_keyed = _keyed(c)
    if c.count("input channel state handles") or c.count("result subpartition state handles"):
        raise c.fail("unaligned checkpoint channel state is not supported")
    return SubtaskState(index, managed_op, raw_op, managed_keyed, raw_keyed)


def _operator(c: Cursor, version: int) -> OperatorMeta:
    name = c.utf("operator name") if version >= 5 else ""
    uid = c.utf("operator uid") if version >= 5 else ""
    op_id = c.take(16, "operator id").hex()
    parallelism = c.i32("parallelism")
    max_parallelism = c.i32("max parallelism")
    _stream(c)  # coordinator state
    n = c.i32("subtask count")
    if n < 0:
        return OperatorMeta(name, uid, op_id, parallelism, max_parallelism, (), True)
    subtasks = []
    for _ in range(n):
        index = c.i32("subtask index")
        if index < 0:
            continue  # a finished subtask has no state
        subtasks.append(_subtask(c, index))
    return OperatorMeta(name, uid, op_id, parallelism, max_parallelism, tuple(subtasks))


def _v3_kind(operators: tuple[OperatorMeta, ...]) -> tuple[bool, bool]:
    """(is a savepoint, is native) of version 3, which records no properties: told by the keyed
    handles. Flink 1.13-1.15 write a savepoint's key groups under tag 7 and a full checkpoint's
    under 3 or 12; an incremental handle is a native savepoint's (1.15) when its files are all
    relative, a checkpoint's otherwise (shared files by absolute path). Without keyed state: a
    canonical savepoint (what Flink restores it as)."""
    handles = [s.managed_keyed for o in operators for s in o.subtasks if s.managed_keyed is not None]
    if any(h.kind == "heap_checkpoint" for h in handles):
        return False, False
    incremental = [h for h in handles if h.kind == "incremental"]
    if not incremental:
        return True, False
    relative = all(f.kind != "file" for h in incremental for _, f in h.files)
    return relative, relative


def parse_metadata(buf: bytes, where: str) -> CheckpointMeta:
    """Parse the bytes of a ``_metadata`` file (``where`` names it in errors)."""
    c = Cursor(buf, where)
    c.expect_int(MAGIC - (1 << 32) if MAGIC >= 1 << 31 else MAGIC, "magic number")
    at = c.pos
    version = c.i32("metadata version")
    if version not in SUPPORTED_VERSIONS:
        raise c.fail(f"unsupported metadata version {version}", at)
    checkpoint_id = c.i64("checkpoint id")
    for _ in range(c.count("master state count")):
        c.expect_int(_MASTER_MAGIC, "master state magic")
        c.take(c.count("master state length"), "master state")
    operators = tuple(_operator(c, version) for _ in range(c.count("operator count")))
    savepoint, native = _trailer(c) if version >= 4 else _v3_kind(operators)
    if version < 4 and not c.at_end():
        raise c.fail("trailing bytes after the operators")
    return CheckpointMeta(version, checkpoint_id, operators, savepoint, native)


def is_flink_metadata(head: bytes) -> bool:
    """Whether ``head`` (the first bytes of a file) starts like Flink's ``_metadata``."""
    return len(head) >= 4 and int.from_bytes(head[:4], "big") == MAGIC
