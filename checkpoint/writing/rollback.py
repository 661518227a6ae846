"""Rolling a checkpoint root back to a retained checkpoint, as Delta's ``RESTORE`` and
Iceberg's ``rollback_to_snapshot`` do: nothing is deleted or rewritten; a new version,
equal to the chosen one, is appended through the one commit path.

The new version references the chosen checkpoint's files (no byte is copied), keeps its
operators, kind and properties but the attempt token of the run that wrote it (so no live
backend a Python worker kept is mistaken for it: the next ``process`` run restores from
the files), and records where it came from (:data:`ROLLED_BACK_TO`, :data:`ROLLED_BACK_FROM`).
A run that started before the rollback then fails to commit with ``[CONCURRENT_RUN]`` (the
latest checkpoint is no longer the one it ran from) instead of building on state the
rollback replaced. The chosen checkpoint must verify whole (every file's size and SHA-256)
before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flinkstate.state.errors import InvalidArgumentError

from ..errors import CheckpointCorruptError, CheckpointNotFoundError
from ..manifest import RUN_TOKEN_PROPERTY
from ..reading.verified import check_files
from ..storage import Storage
from .append import begin_append
from .versions import completed_ids, load_version

ROLLED_BACK_TO = "flinkstate.rollback.to"
"""The property of a rolled-back version naming the checkpoint it equals."""
ROLLED_BACK_FROM = "flinkstate.rollback.from"
"""The property naming the checkpoint that was the latest when the rollback was made."""


@dataclass(frozen=True)
class Rollback:
    """What a rollback did (or, for a dry run, would do)."""

    to: int
    """The checkpoint rolled back to."""
    previous: int
    """The latest completed checkpoint before the rollback."""
    version: int
    """The new version's id (a dry run: the id it would take)."""
    files: int
    """Files of the chosen checkpoint verified (and referenced by the new version)."""
    bytes: int
    committed: bool
    """False for a dry run."""


def rollback(root: Storage, to: int, *, dry_run: bool = False, retain: int | None = None) -> Rollback:
    """Publish a new checkpoint under ``root`` equal to its retained checkpoint ``to`` (see the
    module docstring); ``dry_run``: verify and report, write nothing; ``retain``: as every
    commit, keep the last ``retain`` completed checkpoints (all when ``None``).

    ``[CHECKPOINT_NOT_FOUND]`` when ``to`` is not a completed checkpoint under ``root``,
    ``[INVALID_ARGUMENT]`` when it already is the latest, ``[CHECKPOINT_CORRUPT]`` naming
    every file of it that does not verify (nothing written), ``[CHECKPOINT_EXISTS]`` when
    another writer committed while the rollback was made (nothing published)."""
    done = completed_ids(root)
    if to not in done:
        raise CheckpointNotFoundError(
            f"no completed checkpoint {to} under {root!r} to roll back to (completed: {done or 'none'})"
        )
    previous = done[-1]
    if to == previous:
        raise InvalidArgumentError(
            f"checkpoint {to} is already the latest under {root!r}: nothing to roll back"
        )
    chosen = load_version(root, to)
    directory = root.child(f"chk-{to}")
    refs = list(chosen.files())
    checked = check_files([(directory, ref) for ref in refs])
    problems = [(ref.path, p) for ref, p in zip(refs, checked, strict=True) if p is not None]
    if problems:
        listed = "; ".join(f"{path}: {p}" for path, p in problems)
        raise CheckpointCorruptError(
            f"checkpoint {to} under {root!r} does not verify, so it cannot be rolled back to ({listed})"
        )
    append = replace(begin_append(root, derive=False), base_version=to)
    size = sum(r.size for r in refs)
    result = Rollback(to, previous, append.version, len(refs), size, committed=not dry_run)
    if dry_run:
        return result
    base = append.load_base(root)
    assert base is not None
    properties = {k: v for k, v in base.properties.items() if k != RUN_TOKEN_PROPERTY}
    properties |= {ROLLED_BACK_TO: str(to), ROLLED_BACK_FROM: str(previous)}
    append.commit(root, base, (), kind=base.kind, properties=properties, retain=retain)
    return result
