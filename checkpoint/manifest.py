"""The manifest (``_metadata``): versioned, human-readable JSON describing one checkpoint.

It records every operator (uid, parallelism, max parallelism, key type), its states'
meta information (name, kind, key/namespace/value types, TTL, operator-state mode,
pickled flag) and each subtask's files (key-group ranges, row counts, sizes, SHA-256).
Paths are relative to the manifest's directory, so a savepoint can be moved or copied.
A checksum over the content detects truncation and tampering.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flinkstate.state.descriptors import StateKind
from flinkstate.state.keyed.snapshot import StateMetaInfo
from flinkstate.state.operator import OperatorStateMode
from flinkstate.state.ttl import StateTtlConfig
from flinkstate.state.ttl.time import LONG_MIN
from flinkstate.state.types.mapping import TypeInformation, type_from_json

from .errors import CheckpointCorruptError
from .fileref import FileRef as FileRef  # re-exported: where every other module finds it
from .jsontext import dumps_indented
from .native_entry import NativeEntry

FORMAT = "flinkstate-checkpoint"
VERSION = 1
METADATA = "_metadata"
WATERMARK_PROPERTY = "flinkstate.process.watermark"
"""The property where the process runner records the watermark it ended at."""
RUN_TOKEN_PROPERTY = "flinkstate.process.token"
"""The property where the process runner records the attempt that wrote each subtask (what
a kept live backend is matched by); it describes the run, not the state."""


@dataclass(frozen=True)
class OperatorStateInfo:
    """An operator state's meta information."""

    name: str
    mode: OperatorStateMode
    value_type: TypeInformation
    user_key_type: TypeInformation | None = None

    @property
    def pickled(self) -> bool:
        return self.value_type.is_pickled or bool(self.user_key_type and self.user_key_type.is_pickled)


Files = tuple[FileRef, ...]


@dataclass(frozen=True)
class SubtaskEntry:
    """What one subtask holds. Each state has an ordered tuple of files, applied in order
    (see :mod:`flinkstate.checkpoint.format` for how later rows combine with earlier ones);
    the state engine writes one file per state, Spark writers may write several."""

    index: int
    key_group_range: tuple[int, int] | None = None
    keyed: Mapping[str, Files] = field(default_factory=dict)
    operator: Mapping[str, Files] = field(default_factory=dict)
    broadcast: Mapping[str, Files] = field(default_factory=dict)
    raw_keyed: FileRef | None = None
    raw_operator: FileRef | None = None
    changes: Mapping[str, Files] = field(default_factory=dict)
    """Per keyed state, the changes this checkpoint recorded where it wrote the state in full
    (a compaction): kept for the change feed, never applied on restore."""
    watermark: int | None = None
    """The keyed backend's event-time watermark when its snapshot was taken (``None``: none)."""
    native: NativeEntry | None = None
    """The keyed state as native RocksDB files (then ``keyed`` is empty; see :mod:`.native_entry`)."""

    def files(self) -> list[FileRef]:
        groups = (self.keyed, self.operator, self.broadcast, self.changes)
        out = [f for group in groups for fs in group.values() for f in fs]
        out += [] if self.native is None else self.native.refs()
        return out + [f for f in (self.raw_keyed, self.raw_operator) if f is not None]

    def stored_key_groups(self, state: str) -> set[int]:
        """The key groups the files of keyed state ``state`` may hold entries of."""
        if self.native is not None:
            return self.native.key_groups(state)
        return {kg for ref in self.keyed.get(state, ()) for kg in ref.key_groups}


@dataclass(frozen=True)
class OperatorEntry:
    """One operator of the job."""

    uid: str
    parallelism: int
    max_parallelism: int
    key_type: TypeInformation | None = None
    keyed_states: tuple[StateMetaInfo, ...] = ()
    operator_states: tuple[OperatorStateInfo, ...] = ()
    subtasks: tuple[SubtaskEntry, ...] = ()

    def keyed_state(self, name: str) -> StateMetaInfo | None:
        return next((s for s in self.keyed_states if s.name == name), None)


@dataclass(frozen=True)
class Manifest:
    """A checkpoint or savepoint."""

    checkpoint_id: int
    kind: str = "checkpoint"
    operators: tuple[OperatorEntry, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    created_at_ms: int = 0
    incremental: bool = False
    """Whether the checkpoint references files of earlier checkpoints (else it is full)."""

    def operator(self, uid: str) -> OperatorEntry | None:
        return next((op for op in self.operators if op.uid == uid), None)

    def watermark(self, uid: str) -> int | None:
        """The event-time watermark a restore of operator ``uid`` continues from: the process
        runner's (property ``flinkstate.process.watermark``), else the least its keyed
        subtasks recorded; ``None`` when there is none (nothing is expired by event time)."""
        op = self.operator(uid)
        if WATERMARK_PROPERTY in self.properties:
            marks: list[int | None] = [int(self.properties[WATERMARK_PROPERTY])]
        elif op is None:
            return None
        else:
            marks = [st.watermark for st in op.subtasks if st.key_group_range is not None]
        if not marks or any(w is None for w in marks):
            return None
        least = min(w for w in marks if w is not None)
        return None if least == LONG_MIN else least

    def files(self) -> list[FileRef]:
        return [f for op in self.operators for st in op.subtasks for f in st.files()]

    def to_bytes(self) -> bytes:
        body = _manifest_json(self)
        digest = hashlib.sha256(_canonical(body)).hexdigest()
        return dumps_indented({**body, "checksum": digest}).encode()

    @staticmethod
    def from_bytes(data: bytes, name: str = METADATA) -> Manifest:
        try:
            doc = json.loads(data.decode("utf-8"))
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            checksum = doc.pop("checksum", None)
        except (UnicodeDecodeError, ValueError) as exc:
            raise CheckpointCorruptError(f"manifest {name} is not valid JSON: {exc}") from exc
        if doc.get("format") != FORMAT:
            raise CheckpointCorruptError(
                f"{name} is not a flinkstate manifest (format {doc.get('format')!r})"
            )
        if checksum != hashlib.sha256(_canonical(doc)).hexdigest():
            raise CheckpointCorruptError(f"manifest {name} fails its checksum: truncated or altered")
        if doc.get("version") != VERSION:
            raise CheckpointCorruptError(
                f"manifest {name} has format version {doc.get('version')!r}; this flinkstate reads {VERSION}",
                code="UNSUPPORTED_VERSION",
            )
        try:
            return _manifest_from(doc)
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointCorruptError(f"manifest {name} is malformed: {exc!r}") from exc


def _canonical(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _type_json(t: TypeInformation | None) -> Any:
    return None if t is None else t.to_json()


def _type_from(data: Any) -> TypeInformation | None:
    return None if data is None else type_from_json(data)


def meta_to_json(meta: StateMetaInfo) -> dict[str, Any]:
    types = (meta.value_type, meta.user_key_type, meta.namespace_type)
    return {
        "name": meta.name,
        "kind": meta.kind.value,
        "value_type": meta.value_type.to_json(),
        "user_key_type": _type_json(meta.user_key_type),
        "namespace_type": _type_json(meta.namespace_type),
        "ttl": None if meta.ttl is None else meta.ttl.to_json(),
        "pickled": any(t is not None and t.is_pickled for t in types),
    }


def meta_from_json(data: Mapping[str, Any]) -> StateMetaInfo:
    value_type = type_from_json(data["value_type"])
    ttl = data.get("ttl")
    return StateMetaInfo(
        str(data["name"]),
        StateKind(data["kind"]),
        value_type,
        _type_from(data.get("user_key_type")),
        _type_from(data.get("namespace_type")),
        None if ttl is None else StateTtlConfig.from_json(ttl),
    )


def _manifest_json(m: Manifest) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "checkpoint_id": m.checkpoint_id,
        "kind": m.kind,
        "created_at_ms": m.created_at_ms,
        "incremental": m.incremental,
        "properties": dict(m.properties),
        "operators": [
            {
                "uid": op.uid,
                "parallelism": op.parallelism,
                "max_parallelism": op.max_parallelism,
                "key_type": _type_json(op.key_type),
                "keyed_states": [meta_to_json(s) for s in op.keyed_states],
                "operator_states": [
                    {
                        "name": s.name,
                        "mode": s.mode.value,
                        "value_type": s.value_type.to_json(),
                        "user_key_type": _type_json(s.user_key_type),
                        "pickled": s.pickled,
                    }
                    for s in op.operator_states
                ],
                "subtasks": [_subtask_json(st) for st in op.subtasks],
            }
            for op in m.operators
        ],
    }


def _subtask_json(st: SubtaskEntry) -> dict[str, Any]:
    return {
        "index": st.index,
        "key_group_range": None if st.key_group_range is None else list(st.key_group_range),
        "keyed": {name: [f.to_json() for f in fs] for name, fs in st.keyed.items()},
        "operator": {name: [f.to_json() for f in fs] for name, fs in st.operator.items()},
        "broadcast": {name: [f.to_json() for f in fs] for name, fs in st.broadcast.items()},
        "raw_keyed": None if st.raw_keyed is None else st.raw_keyed.to_json(),
        "raw_operator": None if st.raw_operator is None else st.raw_operator.to_json(),
        **({"changes": {n: [f.to_json() for f in fs] for n, fs in st.changes.items()}} if st.changes else {}),
        **({"watermark": st.watermark} if st.watermark is not None else {}),
        **({"native": st.native.to_json()} if st.native is not None else {}),
    }


def _subtask_from(data: Mapping[str, Any]) -> SubtaskEntry:
    rng = data.get("key_group_range")

    def files(key: str) -> dict[str, Files]:
        return {str(n): tuple(FileRef.from_json(f) for f in fs) for n, fs in data.get(key, {}).items()}

    def optional(key: str) -> FileRef | None:
        return None if data.get(key) is None else FileRef.from_json(data[key])

    return SubtaskEntry(
        int(data["index"]),
        None if rng is None else (int(rng[0]), int(rng[1])),
        files("keyed"),
        files("operator"),
        files("broadcast"),
        optional("raw_keyed"),
        optional("raw_operator"),
        files("changes"),
        None if data.get("watermark") is None else int(data["watermark"]),
        None if data.get("native") is None else NativeEntry.from_json(data["native"]),
    )


def _manifest_from(doc: Mapping[str, Any]) -> Manifest:
    operators = []
    for op in doc["operators"]:
        states = tuple(
            OperatorStateInfo(
                str(s["name"]),
                OperatorStateMode(s["mode"]),
                type_from_json(s["value_type"]),
                _type_from(s.get("user_key_type")),
            )
            for s in op.get("operator_states", [])
        )
        operators.append(
            OperatorEntry(
                str(op["uid"]),
                int(op["parallelism"]),
                int(op["max_parallelism"]),
                _type_from(op.get("key_type")),
                tuple(meta_from_json(s) for s in op.get("keyed_states", [])),
                states,
                tuple(_subtask_from(st) for st in op.get("subtasks", [])),
            )
        )
    return Manifest(
        int(doc["checkpoint_id"]),
        str(doc["kind"]),
        tuple(operators),
        {str(k): str(v) for k, v in doc.get("properties", {}).items()},
        int(doc.get("created_at_ms", 0)),
        bool(doc.get("incremental", False)),
    )
