"""Turning subtask results into a manifest and committing it (data files first, manifest last)."""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, fields, replace
from typing import Any

from flinkstate.state.keyed.snapshot import StateMetaInfo
from flinkstate.state.types.mapping import TypeInformation

from ..errors import CheckpointError, CheckpointExistsError, CommitFilesMissingError
from ..manifest import METADATA, WATERMARK_PROPERTY, Manifest, OperatorEntry, OperatorStateInfo, SubtaskEntry
from ..storage import Storage
from .presence import check_written
from .versions import InFlight, collect_garbage, replace_operator
from .writer import SubtaskResult

_log = logging.getLogger(__name__)


def _merge_metas(uid: str, metas: Iterable[StateMetaInfo]) -> tuple[StateMetaInfo, ...]:
    """One description per state: the subtasks' (a subtask that used the void namespace only
    agrees with one that fixed a namespace type: :meth:`StateMetaInfo.agrees_with`)."""
    merged: dict[str, StateMetaInfo] = {}
    for meta in metas:
        known = merged.setdefault(meta.name, meta)
        if known.agrees_with(meta):
            merged[meta.name] = meta
        elif not meta.agrees_with(known):
            raise CheckpointError(f"operator {uid!r}: subtasks describe state {meta.name!r} differently")
    return tuple(merged.values())


def _merge_infos(uid: str, infos: Iterable[OperatorStateInfo]) -> tuple[OperatorStateInfo, ...]:
    merged: dict[tuple[bool, str], OperatorStateInfo] = {}
    for info in infos:
        key = (info.mode.value == "broadcast", info.name)
        if merged.setdefault(key, info) != info:
            raise CheckpointError(
                f"operator {uid!r}: subtasks describe operator state {info.name!r} differently",
                code="STATE_MODE_CONFLICT",
            )
    return tuple(merged.values())


def _merge_entries(uid: str, entries: list[SubtaskEntry]) -> SubtaskEntry:
    """One subtask's entry from several partial writes (keyed, operator, raw), field by field:
    a mapping (files by state name) is the union of the writes', a name written twice an
    error; any other field has at most one value besides its default (the key-group range
    may be repeated)."""
    first = entries[0]
    merged: dict[str, Any] = {}
    for f in fields(SubtaskEntry):
        if f.name == "index":
            continue
        values = [getattr(e, f.name) for e in entries]
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        if isinstance(default, Mapping):
            union: dict[str, Any] = {}
            for value in values:
                for name, refs in value.items():
                    if name in union:
                        raise CheckpointError(
                            f"operator {uid!r} subtask {first.index} wrote {f.name} state {name!r} twice"
                        )
                    union[name] = refs
            merged[f.name] = union
            continue
        distinct = []
        for value in values:
            if value != default and value not in distinct:
                distinct.append(value)
        if len(distinct) > 1:
            what = "different key-group ranges" if f.name == "key_group_range" else f"{f.name} twice"
            raise CheckpointError(f"operator {uid!r} subtask {first.index}: wrote {what}: {distinct}")
        merged[f.name] = distinct[0] if distinct else default
    return replace(first, **merged)


def operator_entry(uid: str, results: list[SubtaskResult]) -> OperatorEntry:
    """One operator's entry from the results of its subtasks."""
    shapes = {(r.parallelism, r.max_parallelism) for r in results}
    if len(shapes) != 1:
        raise CheckpointError(
            f"operator {uid!r}: subtasks disagree on (parallelism, max parallelism): {shapes}"
        )
    parallelism, max_parallelism = shapes.pop()
    by_index: dict[int, list[SubtaskEntry]] = {}
    for r in results:
        by_index.setdefault(r.entry.index, []).append(r.entry)
    if any(not 0 <= i < parallelism for i in by_index):
        raise CheckpointError(
            f"operator {uid!r}: subtask indexes {sorted(by_index)} do not fit parallelism {parallelism}"
        )
    entries = [_merge_entries(uid, by_index[i]) for i in sorted(by_index)]
    key_types: set[TypeInformation] = {r.key_type for r in results if r.key_type is not None}
    if len(key_types) > 1:
        raise CheckpointError(
            f"operator {uid!r}: subtasks have different key types {sorted(map(str, key_types))}"
        )
    return OperatorEntry(
        uid,
        parallelism,
        max_parallelism,
        key_types.pop() if key_types else None,
        _merge_metas(uid, (m for r in results for m in r.keyed_states)),
        _merge_infos(uid, (i for r in results for i in r.operator_states)),
        tuple(entries),
    )


def build_manifest(
    checkpoint_id: int,
    kind: str,
    results: Iterable[SubtaskResult],
    properties: Mapping[str, str] | None = None,
    base: Manifest | None = None,
) -> Manifest:
    """The manifest of ``results``, plus the operators of ``base`` that they do not replace."""
    by_uid: dict[str, list[SubtaskResult]] = {}
    for result in results:
        by_uid.setdefault(result.uid, []).append(result)
    operators = [operator_entry(uid, rs) for uid, rs in by_uid.items()]
    increments = any(r.incremental for rs in by_uid.values() for r in rs)
    start = base
    if base is not None:
        start = replace(base, operators=tuple(op for op in base.operators if op.uid not in by_uid))
    return derive_manifest(start, checkpoint_id, kind, operators, properties or {}, increments)


CARRIED_PROPERTIES = (WATERMARK_PROPERTY,)
"""Properties a derived version keeps from its base unless it sets them: facts about the
state (the event-time watermark a restore continues from), not about the run that wrote it."""


def derive_manifest(
    base: Manifest | None,
    checkpoint_id: int,
    kind: str,
    operators: Iterable[OperatorEntry],
    properties: Mapping[str, str],
    increments: bool = False,
) -> Manifest:
    """The one way a new version's manifest is made: ``base`` (paths already as seen from the
    new version; ``None``: an empty one) with ``operators`` added or replacing those of the
    same uid, the new id, kind, ``properties`` (plus the base's :data:`CARRIED_PROPERTIES`
    it does not set) and creation time. Made with ``dataclasses.replace``, so every other
    field of the base survives. Incremental when ``increments`` (a subtask wrote an
    increment) or when a file of an earlier checkpoint is referenced."""
    manifest = base if base is not None else Manifest(checkpoint_id)
    for op in operators:
        manifest = replace_operator(manifest, op)
    carried = {k: v for k, v in manifest.properties.items() if k in CARRIED_PROPERTIES} if base else {}
    manifest = replace(manifest, checkpoint_id=checkpoint_id, kind=kind, properties={**carried, **properties},
                       created_at_ms=int(time.time() * 1000))  # fmt: skip
    return replace(manifest, incremental=increments or references_earlier(manifest))


def references_earlier(manifest: Manifest) -> bool:
    """Whether ``manifest`` references a file an earlier checkpoint wrote (by the file's
    recorded origin; one without it, by a path outside the version's directory)."""
    return any(
        f.checkpoint_id != manifest.checkpoint_id if f.checkpoint_id is not None
        else posixpath.normpath(f.path).startswith("../")
        for f in manifest.files()
    )  # fmt: skip


def publish_manifest(
    directory: Storage,
    manifest: Manifest,
    written: Iterable[str],
    *,
    root: Storage | None = None,
    retain: int | None = None,
    in_flight: InFlight | None = None,
) -> None:
    """The one way a manifest is published: the files it wrote checked, create-if-absent,
    idempotent, then retention.

    First, every file the version wrote must be there with its recorded size, as
    ``directory`` sees it (one listing per directory, see :func:`.presence.check_written`);
    if one is not, nothing is published and our ``written`` files are deleted
    (``[COMMIT_FILES_MISSING]``), unless a manifest is there already. When the create
    fails (a lost race, or a retried request whose first attempt landed), the manifest that
    is there decides: the same bytes as ours means our commit succeeded; another
    committer's means we lost, and only then are our ``written`` files deleted
    (``[CHECKPOINT_EXISTS]``). When the outcome is unknown and no manifest is there, the
    error is raised and our files are left for the next commit's cleanup (a late create
    may still land). After a successful publish, ``root`` (a checkpoint root) keeps its last
    ``retain`` completed checkpoints (all when ``None``) and loses every unreferenced file
    but those ``in_flight`` holds and orphans younger than the grace period (another
    writer's, not yet committed: see :func:`.versions.collect_garbage`).
    """
    try:
        check_written(directory, manifest)
    except CommitFilesMissingError:
        if not _manifest_there(directory):  # else the create below decides (a lost race's
            _delete(directory, written)  # winner's retention deleted our files)
            raise
    data = manifest.to_bytes()
    try:
        directory.create_exclusive(METADATA, data)
    except CheckpointError as exc:
        if not _published_by_us(directory, data):
            if isinstance(exc, CheckpointExistsError):
                _delete(directory, written)
            raise
    if root is not None:
        version = manifest.checkpoint_id  # when ``directory`` is its chk-<id>, no need to read it back
        same = directory.root == root.path(f"chk-{version}") and directory.fs is root.fs
        try:
            collect_garbage(root, retain, known={version: manifest} if same else None, in_flight=in_flight)
        except (OSError, CheckpointError) as exc:  # committed all the same; the next commit retries
            _log.warning(
                "retention under %r failed after checkpoint %d: %s", root, manifest.checkpoint_id, exc
            )


def _delete(directory: Storage, written: Iterable[str]) -> None:
    for name in written:
        directory.delete(name)


def _manifest_there(directory: Storage) -> bool:
    directory.fs.invalidate_cache(directory.path(""))
    return directory.exists(METADATA)


def _published_by_us(directory: Storage, data: bytes) -> bool:
    """Whether ``directory`` holds exactly the manifest ``data`` (re-read, uncached)."""
    directory.fs.invalidate_cache(directory.path(""))
    try:
        return directory.read_bytes(METADATA) == data
    except CheckpointError:
        return False
