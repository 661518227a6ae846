"""Checkpoints and savepoints on storage: ids, the commit protocol, retention, discovery.

Layout (modelled on Flink's)::

    <root>/chk-<id>/_metadata      the manifest, written last, create-if-absent
    <root>/chk-<id>/<unique>.parquet  immutable data files

A checkpoint exists exactly when its manifest does. A savepoint is one such directory
on its own, anywhere, with relative paths: it can be copied or moved. After a commit the
last ``retain`` completed checkpoints are kept; older ones, abandoned attempts (no
manifest, older than the newest completed: once past the grace period, see
:func:`.versions.collect_garbage`) and files no retained manifest references are deleted,
but never what a checkpoint still in flight from the same :class:`CheckpointStorage`
holds (see :mod:`.inflight`). A commit is refused when a
later checkpoint has completed (``[CHECKPOINT_SUBSUMED]``: discarded, as Flink does) or
when files of earlier checkpoints it references are gone (``[INCREMENT_BASE_MISSING]``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from ..errors import CheckpointError, CheckpointNotFoundError
from ..manifest import METADATA, Manifest
from ..reading.restore import CompletedCheckpoint
from ..storage import Storage
from .increments import ChainPolicy
from .inflight import InFlightCheckpoints
from .pending import PendingCheckpoint
from .versions import DEFAULT_GRACE, Garbage, check_grace, collect_garbage, completed_ids, version_ids

ROCKSDB_FORMATS = ("parquet", "native")


class CheckpointStorage:
    """The checkpoints of one job under a root URL (``file://``, ``s3://``, ``memory://``, a path)."""

    def __init__(
        self,
        url: str,
        storage_options: Mapping[str, Any] | None = None,
        retain: int = 3,
        *,
        incremental: bool = False,
        max_chain_files: int = ChainPolicy.max_files,
        max_chain_bytes_ratio: float = ChainPolicy.max_bytes_ratio,
        rocksdb_format: str = "parquet",
    ) -> None:
        """``incremental``: checkpoints write only what changed since the last completed one
        (see :mod:`.increments`); a state's chain is compacted into one full file when it would
        hold more than ``max_chain_files`` files or its deltas more than
        ``max_chain_bytes_ratio`` times its base's bytes. ``rocksdb_format``: how a RocksDB
        backend is checkpointed: ``"parquet"`` (portable: savepoints, the heap, Spark,
        ``convert``) or ``"native"`` (its SST files, each stored once; see :mod:`.native`)."""
        if type(retain) is not int or retain < 1:
            raise CheckpointError(f"retain must be a positive int, got {retain!r}", code="INVALID_ARGUMENT")
        if type(incremental) is not bool:
            raise CheckpointError(f"incremental must be a bool, got {incremental!r}", code="INVALID_ARGUMENT")
        if rocksdb_format not in ROCKSDB_FORMATS:
            raise CheckpointError(
                f"rocksdb_format must be one of {list(ROCKSDB_FORMATS)}, got {rocksdb_format!r}",
                code="INVALID_ARGUMENT",
            )
        self.rocksdb_format = rocksdb_format
        self.storage = Storage(url, storage_options)
        self.retain = retain
        self.incremental = incremental
        self.policy = ChainPolicy(max_chain_files, max_chain_bytes_ratio)
        self._in_flight = InFlightCheckpoints()

    def latest_id(self) -> int | None:
        ids = self.completed_ids()
        return ids[-1] if ids else None

    def begin(self, checkpoint_id: int | None = None, incremental: bool | None = None) -> PendingCheckpoint:
        """Start checkpoint ``checkpoint_id`` (default: one past every existing id), as an
        increment or in full (default: as the storage was configured)."""
        if incremental is not None and type(incremental) is not bool:
            raise CheckpointError(f"incremental must be a bool, got {incremental!r}", code="INVALID_ARGUMENT")
        known = self._ids()
        latest = self.latest_id()
        if checkpoint_id is None:
            checkpoint_id = (known[-1] if known else 0) + 1
        elif type(checkpoint_id) is not int or checkpoint_id < 1:
            raise CheckpointError(
                f"a checkpoint id is a positive int, got {checkpoint_id!r}", code="INVALID_ARGUMENT"
            )
        elif latest is not None and checkpoint_id <= latest:
            raise CheckpointError(
                f"checkpoint ids only move forward: {checkpoint_id} is not after the latest "
                f"completed {latest}",
                code="CHECKPOINT_ID_NOT_NEW",
            )
        directory = self.storage.child(f"chk-{checkpoint_id}")
        increment = self.incremental if incremental is None else incremental
        recording = self.incremental or increment  # a full checkpoint of an incremental job rebases it
        native = self.rocksdb_format == "native"
        pending = PendingCheckpoint(directory, checkpoint_id, root=self.storage, retain=self.retain,
                                    policy=self.policy if recording else None, full=not increment,
                                    in_flight=self._in_flight, native=native)  # fmt: skip
        self._in_flight.add(pending)
        return pending

    def load(self, checkpoint_id: int | None = None, allow_pickle: bool = False) -> CompletedCheckpoint:
        """A completed checkpoint (default: the latest)."""
        if checkpoint_id is None:
            checkpoint_id = self.latest_id()
            if checkpoint_id is None:
                raise CheckpointNotFoundError(f"no completed checkpoint under {self.storage!r}")
        return load_directory(self.storage.child(f"chk-{checkpoint_id}"), allow_pickle)

    def cleanup(
        self,
        dry_run: bool = False,
        older_than: timedelta = DEFAULT_GRACE,
        allow_short_grace: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> Garbage:
        """Apply retention and delete what no retained checkpoint references (see
        :func:`.versions.collect_garbage`); return what went and what was spared.

        Reference-aware: files a retained checkpoint uses stay, wherever they are, and so
        does what a checkpoint in flight from this storage holds. Orphans (files no manifest
        references: perhaps a running job's) go only once older than ``older_than``; one
        shorter than an hour needs ``allow_short_grace`` (``[GRACE_TOO_SHORT]``). With
        ``dry_run``, nothing is deleted and what would be is returned. ``progress(done,
        total)``: files looked at so far, of those listed.
        """
        grace = check_grace(older_than, allow_short_grace)
        return collect_garbage(self.storage, self.retain, dry_run, in_flight=self._in_flight.held(),
                               older_than=grace, progress=progress)  # fmt: skip

    def _ids(self) -> list[int]:
        return version_ids(self.storage)

    def completed_ids(self) -> list[int]:
        return completed_ids(self.storage)


def load_directory(
    directory: Storage, allow_pickle: bool = False, data: bytes | None = None
) -> CompletedCheckpoint:
    """The checkpoint or savepoint whose manifest is in ``directory`` (``data``: its bytes,
    when the caller has read them)."""
    data = directory.read_bytes(METADATA) if data is None else data
    return CompletedCheckpoint(
        directory, Manifest.from_bytes(data, f"{directory!r}/{METADATA}"), allow_pickle
    )


def begin_savepoint(
    url: str, storage_options: Mapping[str, Any] | None = None, savepoint_id: int = 1
) -> PendingCheckpoint:
    """A savepoint written into the directory ``url`` (which must not hold one yet)."""
    storage = Storage(url, storage_options)
    if storage.exists(METADATA):
        raise CheckpointError(f"{storage!r} already holds a savepoint", code="CHECKPOINT_EXISTS")
    return PendingCheckpoint(storage, savepoint_id, kind="savepoint")
