"""Opening any snapshot by its path: one of ours, or Flink's own savepoint or checkpoint.

This module sits above both :mod:`.writing` and :mod:`.flink`, so that neither imports the
other to tell the two formats apart. Flink's reader is imported only when a directory holds a
``_metadata``: opening a checkpoint root does not load it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import CheckpointNotFoundError
from .manifest import METADATA
from .reading.restore import CompletedCheckpoint
from .storage import Storage
from .writing.checkpoints import CheckpointStorage, load_directory

if TYPE_CHECKING:  # the reader is imported lazily (see the module docstring); no cycle either way
    from .flink.reader.savepoint import FlinkSavepoint


def open_checkpoint(
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    checkpoint_id: int | None = None,
    allow_pickle: bool = False,
    types: Mapping[str, Any] | None = None,
) -> CompletedCheckpoint | FlinkSavepoint:
    """A savepoint directory (or its ``_metadata``), a ``chk-<id>`` directory, or a root (its
    latest checkpoint, or ``checkpoint_id``). The ``_metadata`` is read once.

    A directory holding Flink's own ``_metadata`` opens as a
    :class:`~flinkstate.checkpoint.flink.FlinkSavepoint` (same ``keyed_backend``,
    ``restore_keyed`` and ``operator_backend``; ``types``: its declared types, see
    :func:`~flinkstate.checkpoint.flink.read_savepoint`).
    """
    suffix = "/" + METADATA
    directory = url.rstrip("/")
    directory = directory[: -len(suffix)] if directory.endswith(suffix) else url
    storage = Storage(directory, storage_options)
    if checkpoint_id is None:
        try:
            data = storage.read_bytes(METADATA)
        except (CheckpointNotFoundError, IsADirectoryError, NotADirectoryError):
            data = None
        if data is not None:
            from .flink.metadata.metadata_read import is_flink_metadata
            from .flink.reader.savepoint import read_savepoint

            if is_flink_metadata(data[:4]):
                return read_savepoint(directory, storage_options, types, allow_pickle, data)
            return load_directory(storage, allow_pickle, data)
    return CheckpointStorage(directory, storage_options).load(checkpoint_id, allow_pickle)
