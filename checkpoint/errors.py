"""Checkpoint errors: part of the one flinkstate hierarchy."""

from __future__ import annotations

from flinkstate.state.errors import FlinkStateError, StateMigrationError


class CheckpointError(FlinkStateError):
    """A checkpoint could not be written, found or read."""

    default_code = "CHECKPOINT_ERROR"


class StorageError(CheckpointError, OSError):
    """The storage failed a request after its retries (an object store's errors, resets,
    timeouts; a local filesystem's I/O errors). Nothing it left half done is committed."""

    default_code = "STORAGE_FAILED"


class CheckpointCorruptError(CheckpointError):
    """A manifest or data file is truncated, altered or unreadable; the message names it."""

    default_code = "CHECKPOINT_CORRUPT"


class CheckpointExistsError(CheckpointError):
    """Another writer committed this checkpoint id first."""

    default_code = "CHECKPOINT_EXISTS"


class CommitFilesMissingError(CheckpointError):
    """Files a commit's tasks reported written are not there whole where the committer looks
    (a local path on a multi-host cluster): nothing is published, the attempt's files deleted."""

    default_code = "COMMIT_FILES_MISSING"


class CheckpointStateError(CheckpointError, RuntimeError):
    """A pending checkpoint was used in a state that does not allow it (committed, aborted)."""

    default_code = "CHECKPOINT_STATE"


class CheckpointNotFoundError(CheckpointError):
    """No (completed) checkpoint where one was asked for."""

    default_code = "CHECKPOINT_NOT_FOUND"


class EditError(CheckpointError):
    """An offline edit of a savepoint that cannot apply (an unknown operator or state, two
    operators with one uid, ...): refused before anything is written; the code says which."""

    default_code = "INVALID_EDIT"


class SnapshotDiffError(CheckpointError):
    """Two snapshots whose states cannot be compared entry by entry (another kind or type, key
    groups numbered by another max parallelism), or a diff asked of what one cannot diff."""

    default_code = "DIFF_INCOMPARABLE"


__all__ = [
    "CheckpointCorruptError",
    "CheckpointError",
    "CheckpointExistsError",
    "CheckpointNotFoundError",
    "CheckpointStateError",
    "CommitFilesMissingError",
    "EditError",
    "SnapshotDiffError",
    "StateMigrationError",
]


class DeclaredTypeError(FlinkStateError):
    """A declared type is malformed, applies to no such state, or does not fit its bytes (or
    a column's values do not fit their type: ``[TYPE_MISMATCH]``)."""

    default_code = "INVALID_OPTION"
