"""Key-grouped checkpoints and savepoints on any fsspec filesystem, with rescaling restore."""

from .append import DATA_DIR, VersionAppend, begin_append
from .checkpoints import (
    CheckpointStorage,
    PendingCheckpoint,
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
)
from .manifest import Manifest
from .restore import CompletedCheckpoint
from .storage import Storage
from .writer import SubtaskResult

__all__ = [
    "DATA_DIR",
    "CheckpointCorruptError",
    "CheckpointError",
    "CheckpointExistsError",
    "CheckpointNotFoundError",
    "CheckpointStorage",
    "CompletedCheckpoint",
    "Manifest",
    "PendingCheckpoint",
    "Storage",
    "SubtaskResult",
    "VersionAppend",
    "begin_append",
    "begin_savepoint",
    "load_directory",
    "open_checkpoint",
    "publish_manifest",
]
