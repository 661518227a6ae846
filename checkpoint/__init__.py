"""Key-grouped checkpoints and savepoints on any fsspec filesystem, with rescaling restore.

This package's names are its face: ``connector/`` and ``cli/`` use nothing else of
``checkpoint/`` (an import contract in ``make lint`` keeps it so). Writing: a checkpoint
(:class:`CheckpointStorage`, :class:`PendingCheckpoint`, one snapshot -> write -> release
path in :class:`CheckpointTarget`), a version appended on the latest one
(:func:`begin_append`), retention and ``gc``. Reading: a checkpoint opened
(:func:`open_checkpoint`), chosen key groups of a state (:func:`read_key_groups`, the one
path of restores, the Spark reader and the change feed), verified reads of whole files
(:func:`open_whole`, :func:`check_file`). Views: state as the rows and schemas of its
DataFrame views, and where its weight lies.
"""

from .append import DATA_DIR, VersionAppend, begin_append
from .arrow_codec import from_arrow, to_arrow
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
from .format import (
    WrittenFile,
    keyed_schema,
    operator_schema,
    read_row_group,
    storage_table,
    write_row_groups,
)
from .increments import ChainPolicy
from .keyed_files import KeyGroupFiles, key_group_files, only_key_groups, read_key_groups
from .keys import check_ids_below, key_groups_of, key_mask, keys_of_type, parse_id_set, parse_json_keys
from .manifest import METADATA, FileRef, Manifest, OperatorEntry, OperatorStateInfo, SubtaskEntry
from .merge import DELETE, merge_keyed
from .metadata import metadata_table
from .restore import CompletedCheckpoint
from .rewrite import rewrite_max_parallelism
from .rows import expiry_cutoff, key_group_rows, operator_rows
from .stats import Load, key_group_loads, state_entries, subtask_loads
from .storage import Storage, nested_options
from .target import CheckpointTarget
from .verified import check_file, open_whole
from .versions import DEFAULT_GRACE, MIN_GRACE, Garbage, completed_ids, load_version, version_ids
from .views import METADATA_SCHEMA, keyed_view, keyed_view_schema, operator_view_schema, spark_compatible
from .writer import SubtaskResult, store_file

__all__ = [
    "DATA_DIR",
    "DEFAULT_GRACE",
    "DELETE",
    "METADATA",
    "METADATA_SCHEMA",
    "MIN_GRACE",
    "ChainPolicy",
    "CheckpointCorruptError",
    "CheckpointError",
    "CheckpointExistsError",
    "CheckpointNotFoundError",
    "CheckpointStateError",
    "CheckpointStorage",
    "CheckpointTarget",
    "CompletedCheckpoint",
    "FileRef",
    "Garbage",
    "KeyGroupFiles",
    "Load",
    "Manifest",
    "OperatorEntry",
    "OperatorStateInfo",
    "PendingCheckpoint",
    "PendingStatus",
    "Storage",
    "SubtaskEntry",
    "SubtaskResult",
    "VersionAppend",
    "WrittenFile",
    "begin_append",
    "begin_savepoint",
    "check_file",
    "check_ids_below",
    "completed_ids",
    "expiry_cutoff",
    "from_arrow",
    "key_group_files",
    "key_group_loads",
    "key_group_rows",
    "key_groups_of",
    "key_mask",
    "keyed_schema",
    "keyed_view",
    "keyed_view_schema",
    "keys_of_type",
    "load_directory",
    "load_version",
    "merge_keyed",
    "metadata_table",
    "nested_options",
    "only_key_groups",
    "open_checkpoint",
    "open_whole",
    "operator_rows",
    "operator_schema",
    "operator_view_schema",
    "parse_id_set",
    "parse_json_keys",
    "publish_manifest",
    "read_key_groups",
    "read_row_group",
    "rewrite_max_parallelism",
    "spark_compatible",
    "state_entries",
    "storage_table",
    "store_file",
    "subtask_loads",
    "to_arrow",
    "version_ids",
    "write_row_groups",
]
