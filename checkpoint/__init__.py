"""Key-grouped checkpoints and savepoints on any fsspec filesystem, with rescaling restore.

This package's names are its face: ``connector/`` and ``cli/`` use nothing else of
``checkpoint/`` (an import contract in ``make lint`` keeps it so). Writing: a checkpoint
(:class:`CheckpointStorage`, :class:`PendingCheckpoint`, one snapshot -> write -> release
path in :class:`CheckpointTarget`), a version appended on the latest one
(:func:`begin_append`), retention and ``gc``, a rollback to a retained one (:func:`rollback`).
Reading: a checkpoint opened (:func:`open_checkpoint`), chosen key groups of a state
(:func:`read_key_groups`, the one path of restores, the Spark reader and the change feed;
:func:`rows_of_keys` picks keys),
files verified whole (:func:`check_files`). A task's Arrow rows as our state files
(:func:`keyed_state_files`, :func:`operator_state_file`, :func:`broadcast_map_file`: the Spark
writer's and the streaming sink's one way), stored under a name no task shares
(:func:`store_state_file`), a chain merged into one (:func:`compacted_chain`). Offline edits
(:class:`SavepointEdits`, :func:`edit_checkpoint`; Flink's savepoints: ``flink.edit_savepoint``).
Views: state as the rows and schemas of its DataFrame views, and where its weight lies.
"""

from .arrow_codec import to_arrow
from .edits import Change, EditPlan, KeyedRows, SavepointEdits
from .errors import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointExistsError,
    CheckpointNotFoundError,
    CheckpointStateError,
    CommitFilesMissingError,
    EditError,
)
from .local_cache import DEFAULT_CACHE_BYTES, CachedStorage, FileCache
from .manifest import (
    METADATA,
    RUN_TOKEN_PROPERTY,
    FileRef,
    Manifest,
    OperatorEntry,
    OperatorStateInfo,
    SubtaskEntry,
)
from .opening import open_checkpoint
from .parquet_files import WrittenFile
from .reading.keyed_files import KeyGroupFiles, key_group_files, only_key_groups, read_key_groups
from .reading.keys import (
    check_ids_below,
    key_groups_of,
    keys_of_type,
    parse_id_set,
    parse_json_keys,
    rows_of_keys,
)
from .reading.merge import DELETE, stored_key_group
from .reading.native import native_key_groups, refuse_native
from .reading.restore import CompletedCheckpoint
from .reading.verified import check_files
from .state_rows import fit
from .storage import Storage, nested_options
from .views.metadata import metadata_table
from .views.rows import expiry_cutoff, key_group_rows, operator_rows
from .views.schemas import (
    METADATA_SCHEMA,
    keyed_view,
    keyed_view_schema,
    operator_view_schema,
    spark_compatible,
)
from .views.stats import Load, key_group_loads, state_entries, subtask_loads
from .writing.append import DATA_DIR, VersionAppend, begin_append
from .writing.checkpoints import CheckpointStorage, begin_savepoint
from .writing.edit import edit_checkpoint, plan_checkpoint_edits
from .writing.increments import ChainPolicy
from .writing.pending import PendingCheckpoint, PendingStatus
from .writing.rewrite import rewrite_max_parallelism
from .writing.rollback import Rollback, rollback
from .writing.state_files import (
    broadcast_map_file,
    compacted_chain,
    keyed_state_files,
    operator_state_file,
    store_state_file,
)
from .writing.target import CheckpointTarget
from .writing.versions import DEFAULT_GRACE, MIN_GRACE, Garbage, completed_ids, load_version, version_ids
from .writing.writer import SubtaskResult

__all__ = [
    "DATA_DIR",
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_GRACE",
    "DELETE",
    "METADATA",
    "METADATA_SCHEMA",
    "RUN_TOKEN_PROPERTY",
    "MIN_GRACE",
    "CachedStorage",
    "ChainPolicy",
    "Change",
    "CheckpointCorruptError",
    "CheckpointError",
    "CheckpointExistsError",
    "CheckpointNotFoundError",
    "CheckpointStateError",
    "CheckpointStorage",
    "CheckpointTarget",
    "CommitFilesMissingError",
    "CompletedCheckpoint",
    "EditError",
    "EditPlan",
    "FileCache",
    "FileRef",
    "Garbage",
    "KeyGroupFiles",
    "KeyedRows",
    "Load",
    "Manifest",
    "OperatorEntry",
    "OperatorStateInfo",
    "PendingCheckpoint",
    "PendingStatus",
    "Rollback",
    "SavepointEdits",
    "Storage",
    "SubtaskEntry",
    "SubtaskResult",
    "VersionAppend",
    "WrittenFile",
    "begin_append",
    "begin_savepoint",
    "broadcast_map_file",
    "check_files",
    "check_ids_below",
    "compacted_chain",
    "completed_ids",
    "edit_checkpoint",
    "expiry_cutoff",
    "fit",
    "key_group_files",
    "key_group_loads",
    "key_group_rows",
    "key_groups_of",
    "keyed_state_files",
    "keyed_view",
    "keyed_view_schema",
    "keys_of_type",
    "load_version",
    "metadata_table",
    "native_key_groups",
    "nested_options",
    "only_key_groups",
    "open_checkpoint",
    "operator_rows",
    "operator_state_file",
    "operator_view_schema",
    "parse_id_set",
    "parse_json_keys",
    "plan_checkpoint_edits",
    "read_key_groups",
    "refuse_native",
    "rewrite_max_parallelism",
    "rollback",
    "rows_of_keys",
    "spark_compatible",
    "state_entries",
    "store_state_file",
    "stored_key_group",
    "subtask_loads",
    "to_arrow",
    "version_ids",
]
