"""One file a manifest references: where it is, its size and checksums, what it holds; and
the file-name-safe rendering of the names data files are named after (:func:`slug`)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FileRef:
    """One data file. ``key_groups`` maps key group -> (row group index, rows)."""

    path: str
    size: int
    sha256: str
    rows: int
    key_groups: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    footer_sha256: str | None = None
    """SHA-256 of the Parquet footer and trailer (reads of a few row groups check it)."""
    checkpoint_id: int | None = None
    """The checkpoint that wrote the file (``None`` in manifests written before it was recorded)."""
    delta: bool = False
    """The file holds changes (upserts and ``op`` deletes) applied over the files before it."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "path": self.path,
            "size": self.size,
            "sha256": self.sha256,
            "rows": self.rows,
        }
        if self.footer_sha256 is not None:
            data["footer_sha256"] = self.footer_sha256
        if self.checkpoint_id is not None:
            data["checkpoint_id"] = self.checkpoint_id
        if self.delta:
            data["delta"] = True
        if self.key_groups:
            data["key_groups"] = [[kg, rg, n] for kg, (rg, n) in sorted(self.key_groups.items())]
        return data

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> FileRef:
        groups = {int(kg): (int(rg), int(n)) for kg, rg, n in data.get("key_groups", [])}
        footer = data.get("footer_sha256")
        origin = data.get("checkpoint_id")
        return FileRef(str(data["path"]), int(data["size"]), str(data["sha256"]), int(data["rows"]), groups,
                       None if footer is None else str(footer), None if origin is None else int(origin),
                       bool(data.get("delta", False)))  # fmt: skip


def slug(name: str) -> str:
    """A file-name-safe, collision-free rendering of any state or operator name."""
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:40]
    return f"{readable}-{hashlib.sha1(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
