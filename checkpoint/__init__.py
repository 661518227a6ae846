"""Key-grouped checkpoints and savepoints on any fsspec filesystem, with rescaling restore."""

from .append import DATA_DIR, VersionAppend, begin_append
from .checkpoints import (
    CheckpointStorage,
    PendingCheckpoint,
    PendingStatus,
    begin_savepoint,
    load_directory,
    open_checkpoint,
)
from .committer import publish_manifest
from .errors import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointExistsError,
    CheckpointNotFoundError,
    CheckpointStateError,
)
from .manifest import Manifest
from .restore import CompletedCheckpoint
from .storage import Storage
from .target import CheckpointTarget
from .versions import DEFAULT_GRACE, MIN_GRACE, Garbage
from .writer import SubtaskResult

__all__ = [
    "DATA_DIR",
    "CheckpointCorruptError",
    "CheckpointError",
    "CheckpointExistsError",
    "CheckpointNotFoundError",
    "CheckpointStateError",
    "CheckpointStorage",
    "CheckpointTarget",
    "CompletedCheckpoint",
    "DEFAULT_GRACE",
    "Garbage",
    "MIN_GRACE",
    "Manifest",
    "PendingCheckpoint",
    "PendingStatus",
    "Storage",
    "SubtaskResult",
    "VersionAppend",
    "begin_append",
    "begin_savepoint",
    "load_directory",
    "open_checkpoint",
    "publish_manifest",
]
