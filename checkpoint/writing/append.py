"""Appending a version on the latest completed one under a checkpoint root.

What the Spark writer (``append``; ``overwrite`` is the same with no base), the streaming
sink and any other writer of derived versions do, in one place: take the next version
id, load the latest completed version with its paths rebased into the new directory,
let the caller replace or add operators, derive the new manifest from the base (see
:func:`.committer.derive_manifest`: a field of any record the caller does not change
survives) and publish it (create-if-absent) with retention.

``process`` and ``foreach_batch`` commit through :class:`.checkpoints.PendingCheckpoint`
instead: their subtasks snapshot live backends (increments confirmed on commit, files in
flight held from retention) and a run commits only as the successor of the version it
restored from. Their manifest is made by the same :func:`.committer.derive_manifest`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..manifest import Manifest, OperatorEntry
from ..storage import Storage
from .committer import derive_manifest, publish_manifest
from .versions import DATA_DIR, completed_ids, load_version, rebase, version_ids

__all__ = ["DATA_DIR", "VersionAppend", "begin_append"]


@dataclass(frozen=True)
class VersionAppend:
    """A version being appended: its id and the completed version it derives from (``None``:
    from nothing). Small and picklable: a Spark writer takes it to its tasks and commit."""

    version: int
    base_version: int | None

    @property
    def directory(self) -> str:
        """The version's directory, relative to the root."""
        return f"chk-{self.version}"

    def load_base(self, root: Storage) -> Manifest | None:
        """The base version's manifest, its paths as seen from this version's directory."""
        if self.base_version is None:
            return None
        return rebase(load_version(root, self.base_version), f"chk-{self.base_version}", self.directory)

    def commit(
        self,
        root: Storage,
        base: Manifest | None,
        operators: Iterable[OperatorEntry],
        *,
        kind: str,
        properties: Mapping[str, str],
        written: Iterable[str] = (),
        retain: int | None = None,
    ) -> Manifest:
        """Publish ``base`` (from :meth:`load_base`) with ``operators`` added or replacing those
        of the same uid; ``written``: this version's files, deleted when another committer won
        (``[CHECKPOINT_EXISTS]``). Returns the published manifest."""
        manifest = derive_manifest(base, self.version, kind, operators, properties)
        publish_manifest(root.child(self.directory), manifest, written, root=root, retain=retain)
        return manifest


def begin_append(root: Storage, derive: bool = True) -> VersionAppend:
    """The next version under ``root`` (one past every id, completed or not), derived from the
    latest completed version when ``derive`` (and there is one)."""
    ids = version_ids(root)
    done = completed_ids(root) if derive else []
    return VersionAppend((ids[-1] if ids else 0) + 1, done[-1] if done else None)
