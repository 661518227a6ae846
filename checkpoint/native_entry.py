"""A subtask's keyed state as native RocksDB files (``rocksdb_format="native"``).

The manifest lists every file of the subtask's RocksDB checkpoint: its name in the DB
directory (what RocksDB's own MANIFEST calls it), where it is stored (a :class:`FileRef`:
path, size, SHA-256, entries), and for SST files the column families and the key groups
(first, last) they hold. Which column family holds which state, and each list state's
last element sequence, complete what a restore needs to open the files as a DB.
SST files are stored once under the root's ``_data/native/`` by content (their SHA-256),
so later checkpoints reference the files they share; the small other files (RocksDB's
MANIFEST, CURRENT, OPTIONS) go into each checkpoint's directory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .fileref import FileRef


@dataclass(frozen=True)
class NativeFile:
    """One file of a RocksDB checkpoint: ``name`` in the DB directory, stored as ``ref``."""

    name: str
    ref: FileRef
    column_families: tuple[str, ...] = ()
    key_groups: tuple[int, int] | None = None
    """The key groups (first, last) an SST file's keys span; ``None`` for other files."""

    @property
    def sst(self) -> bool:
        return self.name.endswith(".sst")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, **self.ref.to_json()}
        if self.column_families:
            data["column_families"] = list(self.column_families)
        if self.key_groups is not None:
            data["key_groups"] = list(self.key_groups)
        return data

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> NativeFile:
        groups = data.get("key_groups")
        ref = FileRef.from_json({k: v for k, v in data.items() if k not in ("key_groups", "name")})
        return NativeFile(str(data["name"]), ref, tuple(str(c) for c in data.get("column_families", [])),
                          None if groups is None else (int(groups[0]), int(groups[1])))  # fmt: skip


@dataclass(frozen=True)
class NativeEntry:
    """A subtask's keyed state as the files of a RocksDB checkpoint."""

    files: tuple[NativeFile, ...] = ()
    columns: Mapping[str, str] = field(default_factory=dict)
    """The column family of each keyed state."""
    sequences: Mapping[str, int] = field(default_factory=dict)
    """Each list state's last element sequence."""

    def refs(self) -> list[FileRef]:
        return [f.ref for f in self.files]

    def state_files(self, state: str) -> list[NativeFile]:
        """The SST files of ``state``'s column family."""
        cf = self.columns.get(state)
        return [f for f in self.files if f.sst and cf in f.column_families]

    def key_groups(self, state: str) -> set[int]:
        """The key groups ``state``'s SST files span."""
        spans = [f.key_groups for f in self.state_files(state) if f.key_groups is not None]
        return {kg for first, last in spans for kg in range(first, last + 1)}

    def moved(self, move: Callable[[FileRef], FileRef]) -> NativeEntry:
        """This entry with every file's reference passed through ``move`` (a rebase)."""
        return replace(self, files=tuple(replace(f, ref=move(f.ref)) for f in self.files))

    def to_json(self) -> dict[str, Any]:
        return {"files": [f.to_json() for f in self.files], "columns": dict(self.columns),
                "sequences": dict(self.sequences)}  # fmt: skip

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> NativeEntry:
        return NativeEntry(
            tuple(NativeFile.from_json(f) for f in data["files"]),
            {str(k): str(v) for k, v in data.get("columns", {}).items()},
            {str(k): int(v) for k, v in data.get("sequences", {}).items()},
        )
