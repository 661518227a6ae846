"""Checkpoints begun from one :class:`~.checkpoints.CheckpointStorage`, not yet committed
or aborted, and what retention must leave them (see :class:`.versions.InFlight`).

Several checkpoints may be in flight at once (a backend keeps every unconfirmed epoch).
Each holds its own directory, the manifests and files of the checkpoints its increments
build on, and whatever its finished writes reference; so a commit's retention never
deletes what a checkpoint still being written needs. A checkpoint dropped unfinished (no
longer referenced) holds nothing. As a last line of defence, a commit is refused when what
it would publish is not the newest checkpoint or cannot be restored (:func:`refuse_unsound`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Protocol

from flinkstate.state.keyed.snapshot import ChangeSet

from ..errors import CheckpointError
from ..manifest import METADATA, Manifest
from ..storage import Storage
from .presence import written_directories
from .versions import InFlight, completed_after, load_version, missing_files, referenced, states_missing


class Holder(Protocol):
    """A checkpoint in flight: its id, and the root-relative paths of earlier files it holds."""

    checkpoint_id: int

    def holds(self) -> set[str]: ...


class InFlightCheckpoints:
    """The checkpoints in flight of one checkpoint storage (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: weakref.WeakSet[Holder] = weakref.WeakSet()

    def add(self, pending: Holder) -> None:
        with self._lock:
            self._pending.add(pending)

    def discard(self, pending: Holder) -> None:
        with self._lock:
            self._pending.discard(pending)

    def held(self) -> InFlight:
        """What every checkpoint in flight holds, now."""
        with self._lock:
            pending = list(self._pending)
        files: set[str] = set()
        for p in pending:
            files |= p.holds()
        return InFlight(frozenset(p.checkpoint_id for p in pending), frozenset(files))


def base_files(root: Storage, base_id: int) -> set[str]:
    """Root-relative paths of checkpoint ``base_id``'s manifest and of every file it references
    (none when it is gone or unreadable: nothing can then be built on it)."""
    try:
        manifest = load_version(root, base_id)
    except CheckpointError:
        return set()
    return referenced(manifest, f"chk-{base_id}") | {f"chk-{base_id}/{METADATA}"}


def refuse_unsound(
    directory: Storage, root: Storage | None, manifest: Manifest, change_sets: Iterable[ChangeSet]
) -> None:
    """Raise before ``manifest`` is published in ``directory`` (under checkpoint root
    ``root``) if a later checkpoint completed (``[CHECKPOINT_SUBSUMED]``: discarded, as in
    Flink) or a file of an earlier checkpoint it references is gone
    (``[INCREMENT_BASE_MISSING]``: the states of those chains are asked for in full from
    the backends of ``change_sets``, whose changes stay unconfirmed). Directories holding
    files this checkpoint wrote are left to the publish's own check, which lists them once
    and sees every file there (:func:`.presence.check_written`)."""
    later = [] if root is None else completed_after(root, manifest.checkpoint_id)
    if later:
        raise CheckpointError(
            f"checkpoint {manifest.checkpoint_id} is subsumed by the completed checkpoint {later[-1]}: "
            "discarded",
            code="CHECKPOINT_SUBSUMED",
        )
    missing = missing_files(directory, manifest, besides=written_directories(manifest))
    if missing:
        lost = states_missing(manifest, missing)
        for changes in change_sets:
            for name in lost:
                changes.request_full(name)
        raise CheckpointError(
            f"checkpoint {manifest.checkpoint_id} is not published: files of earlier checkpoints it "
            f"references are gone ({', '.join(sorted(missing))}); the next checkpoint of its backends "
            f"writes {sorted(lost)} in full",
            code="INCREMENT_BASE_MISSING",
        )
