"""Versions of a savepoint or checkpoint root, each referencing files of earlier ones.

Spark writes and the streaming sink add versions (``chk-<n>``) that reference files of
earlier versions (relative paths such as ``../chk-3/x.parquet`` or ``../_data/y.parquet``)
instead of copying them. Garbage collection is reference-aware: a file goes only when no
retained version references it, and an orphan (a file no manifest references, perhaps a
running job's, not yet committed) only once older than a grace period, as Iceberg's
orphan-file removal and Delta's VACUUM do.
"""

from __future__ import annotations

import posixpath
import re
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta

from ..errors import CheckpointError
from ..manifest import METADATA, FileRef, Manifest, OperatorEntry, SubtaskEntry
from ..progress import progress_steps
from ..storage import Storage

_CHK = re.compile(r"^chk-(\d+)$")
DATA_DIR = "_data"


def version_ids(root: Storage) -> list[int]:
    """Every ``chk-<n>`` id under ``root``, completed or not."""
    return sorted(int(m.group(1)) for n in root.list_dir() if (m := _CHK.match(n)))


def completed_ids(root: Storage) -> list[int]:
    return [i for i in version_ids(root) if root.exists(f"chk-{i}/{METADATA}")]


def load_version(root: Storage, version: int) -> Manifest:
    return Manifest.from_bytes(root.read_bytes(f"chk-{version}/{METADATA}"), f"chk-{version}/{METADATA}")


def _move(ref: FileRef, old_dir: str, new_dir: str) -> FileRef:
    absolute = posixpath.normpath(posixpath.join(old_dir, ref.path))
    return replace(ref, path=posixpath.relpath(absolute, new_dir or "."))


def rebase(manifest: Manifest, old_dir: str, new_dir: str) -> Manifest:
    """``manifest`` with its paths rewritten from ``old_dir`` to ``new_dir`` (root-relative)."""

    def files(group: dict[str, tuple[FileRef, ...]]) -> dict[str, tuple[FileRef, ...]]:
        return {name: tuple(_move(r, old_dir, new_dir) for r in refs) for name, refs in group.items()}

    def subtask(st: SubtaskEntry) -> SubtaskEntry:
        raw_k = None if st.raw_keyed is None else _move(st.raw_keyed, old_dir, new_dir)
        raw_o = None if st.raw_operator is None else _move(st.raw_operator, old_dir, new_dir)
        native = None if st.native is None else st.native.moved(lambda r: _move(r, old_dir, new_dir))
        return replace(st, keyed=files(dict(st.keyed)), operator=files(dict(st.operator)),
                       broadcast=files(dict(st.broadcast)), raw_keyed=raw_k, raw_operator=raw_o,
                       changes=files(dict(st.changes)), native=native)  # fmt: skip

    ops = tuple(replace(op, subtasks=tuple(subtask(st) for st in op.subtasks)) for op in manifest.operators)
    return replace(manifest, operators=ops)


@dataclass(frozen=True)
class InFlight:
    """What checkpoints still being written keep from retention: their directories (by id)
    and the files of earlier checkpoints they reference or may (root-relative paths)."""

    ids: frozenset[int] = frozenset()
    files: frozenset[str] = frozenset()


def missing_files(directory: Storage, manifest: Manifest, besides: Collection[str] = ()) -> set[str]:
    """The files ``manifest`` (of ``directory``) references in other directories that are
    not there (paths as seen from ``directory``): one listing per directory, not per file;
    the directories ``besides`` are not looked at (another check lists them)."""
    wanted: dict[str, set[str]] = {}
    for ref in manifest.files():
        parent, name = posixpath.split(posixpath.normpath(ref.path))
        if parent and parent not in besides:
            wanted.setdefault(parent, set()).add(name)
    missing: set[str] = set()
    for parent, names in wanted.items():
        missing |= {posixpath.join(parent, n) for n in names.difference(directory.list_dir(parent))}
    return missing


def states_missing(manifest: Manifest, missing: set[str]) -> set[str]:
    """The keyed states whose chains in ``manifest`` reference a file of ``missing``."""
    return {name for op in manifest.operators for st in op.subtasks for name, chain in st.keyed.items()
            if any(posixpath.normpath(r.path) in missing for r in chain)}  # fmt: skip


def completed_after(root: Storage, version: int) -> list[int]:
    """The completed versions after ``version`` (one listing, one lookup per later id)."""
    return [i for i in version_ids(root) if i > version and root.exists(f"chk-{i}/{METADATA}")]


def referenced(manifest: Manifest, directory: str) -> set[str]:
    """Root-relative paths of every file ``manifest`` (in ``directory``) references."""
    return {posixpath.normpath(posixpath.join(directory, f.path)) for f in manifest.files()}


DEFAULT_GRACE = timedelta(hours=24)
"""How old an unreferenced file must be before it is deleted as an orphan (see
:func:`collect_garbage`): a job writes its files before it commits them, and a streaming
batch or a run rarely sits between the two for a day."""
MIN_GRACE = timedelta(hours=1)
"""A shorter grace needs ``allow_short_grace``: it may delete a running job's files."""


def check_grace(older_than: timedelta, allow_short_grace: bool = False) -> timedelta:
    """``older_than`` when it is a safe grace period (at least :data:`MIN_GRACE`, or any
    non-negative one with ``allow_short_grace``), else an error."""
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise CheckpointError(
            f"older_than must be a non-negative timedelta, got {older_than!r}", code="INVALID_ARGUMENT"
        )
    if older_than < MIN_GRACE and not allow_short_grace:
        raise CheckpointError(
            f"a grace period of {older_than} is shorter than {MIN_GRACE}: files a running job has "
            "written but not yet committed may be deleted. Allow it explicitly if no job writes "
            "to this root",
            code="GRACE_TOO_SHORT",
        )
    return older_than


@dataclass(frozen=True)
class Garbage:
    """What a pass of :func:`collect_garbage` deleted (or would, on a dry run) and which
    unreferenced files it left: younger than the grace period, or of unknown age."""

    deleted: tuple[str, ...] = ()
    young: tuple[str, ...] = ()
    undated: tuple[str, ...] = ()


def collect_garbage(
    root: Storage,
    retain: int | None,
    dry_run: bool = False,
    known: Mapping[int, Manifest] | None = None,
    in_flight: InFlight | None = None,
    older_than: timedelta = DEFAULT_GRACE,
    progress: Callable[[int, int], None] | None = None,
) -> Garbage:
    """Keep the last ``retain`` completed versions (all when ``None``) and what they use.

    Deleted at once: versions no longer kept (their manifests and every file only they
    reference, wherever it is: their directories, ``_data``, an earlier version's directory
    whose manifest is gone) and unreferenced files in the directory of a completed version
    (no commit can add to it any more: failed task attempts).
    Deleted only when last modified more than ``older_than`` ago: orphans, files no
    manifest references in ``_data`` or in the directory of a version with no manifest
    (below the newest completed one), which may belong to a job still writing (a streaming
    batch, a run, a Spark write not yet committed). A file whose filesystem gives no time
    is kept. Nothing newer than the newest completed version is touched (it may be in
    progress), nor what ``in_flight`` holds (checkpoints known to be in progress).
    With ``dry_run``, nothing is deleted. ``known``: manifests of versions already in hand
    (just published), not read again. ``progress(done, total)`` is called once the files to
    look at are listed (``done`` 0) and after each of them.
    """
    done = completed_ids(root)
    if not done:
        return Garbage()
    keep = done if retain is None else done[-retain:]
    held = in_flight or InFlight()
    used: set[str] = set(held.files)
    for i in keep:
        manifest = known.get(i) if known else None
        used |= referenced(manifest or load_version(root, i), f"chk-{i}")
    retired = [i for i in done if i not in keep]
    released: set[str] = set()  # what only versions retired now referenced: not orphans
    for i in retired:
        released |= referenced(load_version(root, i), f"chk-{i}")
    cutoff = time.time() - older_than.total_seconds()
    deleted: list[str] = []
    young: list[str] = []
    undated: list[str] = []

    def orphan_is_old(path: str, modified: float | None) -> bool:
        if modified is None:
            undated.append(path)
        elif modified >= cutoff:
            young.append(path)
        return modified is not None and modified < cutoff

    def delete(path: str) -> None:
        if not dry_run:
            root.delete(path)
        deleted.append(path)

    data_files = list(root.walk_files_modified(DATA_DIR))
    versions = [(i, list(root.walk_files_modified(f"chk-{i}")))
                for i in version_ids(root) if i <= keep[-1] and i not in held.ids]  # fmt: skip
    total = len(data_files) + sum(len(files) for _, files in versions)
    looked_at = progress_steps(progress, total)
    # _data first: a pass that stops half-way leaves the manifests that reference what remains
    for path, modified in data_files:
        if path not in used and (path in released or orphan_is_old(path, modified)):
            delete(path)
        looked_at()
    completed = set(done)
    for i, files in versions:
        directory = f"chk-{i}"
        spared = False
        for path, modified in files:
            name = posixpath.basename(path)
            # a manifest another committer of the newest id is creating right now (it loses,
            # but must see [CHECKPOINT_EXISTS], not a vanished temporary file)
            creating = i == keep[-1] and name.startswith(METADATA + ".") and name.endswith(".tmp")
            if path in used or (i in keep and name == METADATA) or creating:
                spared = True
            elif i in completed or path in released or orphan_is_old(path, modified):
                delete(path)
            else:
                spared = True
            looked_at()
        if not dry_run and i not in keep and not spared:
            root.delete(directory)
    return Garbage(tuple(deleted), tuple(young), tuple(undated))


def replace_operator(manifest: Manifest, op: OperatorEntry) -> Manifest:
    """``manifest`` with ``op`` added, or replacing the operator of the same uid."""
    others = tuple(o for o in manifest.operators if o.uid != op.uid)
    return replace(manifest, operators=(*others, op))
