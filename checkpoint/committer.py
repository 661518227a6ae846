"""Turning subtask results into a manifest and committing it (data files first, manifest last)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from flinkstate.state.snapshot import StateMetaInfo
from flinkstate.state.types import TypeInformation

from .errors import CheckpointError, CheckpointExistsError
from .manifest import METADATA, FileRef, Files, Manifest, OperatorEntry, OperatorStateInfo, SubtaskEntry
from .storage import Storage
from .versions import InFlight, collect_garbage
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
    """One subtask's entry from several partial writes (keyed, operator, raw)."""
    first = entries[0]
    ranges = {e.key_group_range for e in entries if e.key_group_range is not None}
    if len(ranges) > 1:
        raise CheckpointError(f"operator {uid!r} subtask {first.index}: different key-group ranges {ranges}")
    merged: dict[str, dict[str, Files]] = {"keyed": {}, "operator": {}, "broadcast": {}, "changes": {}}
    raw: dict[str, FileRef | None] = {"raw_keyed": None, "raw_operator": None}
    for entry in entries:
        for part, files in merged.items():
            for name, ref in getattr(entry, part).items():
                if name in files:
                    raise CheckpointError(
                        f"operator {uid!r} subtask {first.index} wrote {part} state {name!r} twice"
                    )
                files[name] = ref
        for part in raw:
            ref = getattr(entry, part)
            if ref is not None:
                if raw[part] is not None:
                    raise CheckpointError(f"operator {uid!r} subtask {first.index} wrote {part} twice")
                raw[part] = ref
    watermark = next((e.watermark for e in entries if e.watermark is not None), None)
    return SubtaskEntry(
        first.index, next(iter(ranges), None), merged["keyed"], merged["operator"], merged["broadcast"],
        raw["raw_keyed"], raw["raw_operator"], merged["changes"], watermark,
    )  # fmt: skip


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
    if base is not None:
        operators = [op for op in base.operators if op.uid not in by_uid] + operators
    incremental = any(r.incremental for rs in by_uid.values() for r in rs)
    return Manifest(checkpoint_id, kind, tuple(operators), dict(properties or {}), int(time.time() * 1000),
                    incremental)  # fmt: skip


def publish_manifest(
    directory: Storage,
    manifest: Manifest,
    written: Iterable[str],
    *,
    root: Storage | None = None,
    retain: int | None = None,
    in_flight: InFlight | None = None,
) -> None:
    """The one way a manifest is published: create-if-absent, idempotent, then retention.

    When the create fails (a lost race, or a retried request whose first attempt landed),
    the manifest that is there decides: the same bytes as ours means our commit succeeded;
    another committer's means we lost, and only then are our ``written`` files deleted
    (``[CHECKPOINT_EXISTS]``). When the outcome is unknown and no manifest is there, the
    error is raised and our files are left for the next commit's cleanup (a late create
    may still land). After a successful publish, ``root`` (a checkpoint root) keeps its last
    ``retain`` completed checkpoints (all when ``None``) and loses every unreferenced file
    but those ``in_flight`` holds.
    """
    data = manifest.to_bytes()
    try:
        directory.create_exclusive(METADATA, data)
    except CheckpointError as exc:
        if not _published_by_us(directory, data):
            if isinstance(exc, CheckpointExistsError):
                for name in written:
                    directory.delete(name)
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


def _published_by_us(directory: Storage, data: bytes) -> bool:
    """Whether ``directory`` holds exactly the manifest ``data`` (re-read, uncached)."""
    directory.fs.invalidate_cache(directory.path(""))
    try:
        return directory.read_bytes(METADATA) == data
    except CheckpointError:
        return False
