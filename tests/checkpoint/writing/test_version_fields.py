"""Every path that writes a version keeps what it does not mean to change, field by field.

The base sets every field of every manifest record to a non-default value (checked
generically, see :mod:`version_fields`); each path declares the field paths it means to
change, and every other difference fails. A field added to a record later is covered
without editing this file (the base must then set it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from version_fields import MAX_P, NATIVE_UID, OTHER_UID, UID, Job, P, Step, unmeant, write_base

from flinkstate.checkpoint import (
    CheckpointStorage,
    CompletedCheckpoint,
    Manifest,
    SavepointEdits,
    edit_checkpoint,
    open_checkpoint,
)
from flinkstate.checkpoint.reading.merge import merge_keyed
from flinkstate.checkpoint.writing.rewrite import rewrite_max_parallelism
from flinkstate.checkpoint.writing.versions import rebase
from flinkstate.connector.write.batch import BootstrapWriter
from flinkstate.connector.write.stream import StateSink

TOP: list[Step] = [("checkpoint_id",), ("kind",), ("properties",), ("created_at_ms",), ("incremental",)]


def _schema() -> object:
    from pyspark.sql.types import LongType, StructField, StructType

    return StructType([StructField("k", LongType()), StructField("v", LongType())])


def _options(root: Path, state: str) -> dict[str, str]:
    return {"path": str(root), "operator": UID, "state": state, "statetype": "value", "keycolumns": "k",
            "valuecolumns": "v", "parallelism": str(P), "maxparallelism": str(MAX_P)}  # fmt: skip


def _rows() -> pa.RecordBatch:
    keys = list(range(12))
    return pa.record_batch([pa.array(keys), pa.array([k * 7 for k in keys])], names=["k", "v"])


def _bootstrap(overwrite: bool) -> Callable[[Path, Job, Manifest], Manifest]:
    def run(root: Path, job: Job, base: Manifest) -> Manifest:
        writer = BootstrapWriter(_options(root, "s"), _schema(), overwrite)  # type: ignore[arg-type]
        writer.commit([writer.write(iter([_rows()]))])
        new = open_checkpoint(str(root)).manifest
        assert new.incremental is not overwrite  # an append references the base's files
        if not overwrite:  # event-time TTL goes on from the subtasks' watermarks
            assert [st.watermark for st in new.operator(UID).subtasks] == [1000, 2000]
        return new

    return run


def _sink(root: Path, job: Job, base: Manifest) -> Manifest:
    sink = StateSink(_options(root, "s"), _schema())  # type: ignore[arg-type]
    sink.commit([sink.write(iter([_rows()]))], 0)
    return open_checkpoint(str(root)).manifest


def _gc(root: Path, job: Job, base: Manifest) -> Manifest:
    CheckpointStorage(str(root), retain=1).cleanup()
    return open_checkpoint(str(root)).manifest


def _no_raw_keyed(manifest: Manifest) -> Manifest:
    ops = tuple(
        dataclasses.replace(op, subtasks=tuple(dataclasses.replace(st, raw_keyed=None) for st in op.subtasks))
        for op in manifest.operators
    )
    return dataclasses.replace(manifest, operators=ops)


def _rescale(root: Path, job: Job, base: Manifest) -> Manifest:
    # raw keyed state cannot be moved (its keys are unknown): the rewrite refuses it, so
    # it reads the base without
    source = CompletedCheckpoint(CheckpointStorage(str(root)).storage.child(f"chk-{base.checkpoint_id}"),
                                 _no_raw_keyed(base))  # fmt: skip
    result = rewrite_max_parallelism(source, str(root.parent / "rescaled"), MAX_P * 2).manifest
    for uid in (UID, OTHER_UID):
        assert result.watermark(uid) == base.watermark(uid) == 1000
    return result


def _increment(root: Path, job: Job, base: Manifest) -> Manifest:
    new = job.checkpoint(lambda k: k == 3, lambda k: k == 3)
    assert new.incremental and any(f.delta for f in new.files())
    return new


def _compaction(root: Path, job: Job, base: Manifest) -> Manifest:
    new = job.checkpoint(lambda k: True, lambda k: True)  # every chain past its bound
    mine = [f for op in new.operators for st in op.subtasks for fs in st.changes.values() for f in fs]
    assert any(f.checkpoint_id == new.checkpoint_id for f in mine)
    return new


def _entries(cp: CompletedCheckpoint, uid: str, state: str) -> list[tuple[object, ...]]:
    meta, key_type = cp.state_meta(uid, state), cp.operator(uid).key_type
    assert key_type is not None
    tables = cp.read_keyed(uid, state)
    return sorted((kg, *e) for kg, ts in tables for e in merge_keyed(ts, meta, key_type, False).entries())


def _edit(edits: SavepointEdits) -> Callable[[Path, Job, Manifest], Manifest]:
    def run(root: Path, job: Job, base: Manifest) -> Manifest:
        source = open_checkpoint(str(root))
        assert isinstance(source, CompletedCheckpoint)
        edited = edit_checkpoint(source, str(root.parent / "edited"), edits)
        for uid in (UID, OTHER_UID):  # the states kept restore as from the source (chains applied)
            for name in ("v", "m"):
                assert _entries(edited, uid, name) == _entries(source, uid, name)
        for name in ("c", "l"):  # and those held as native RocksDB files, from the edited savepoint's copies
            assert _entries(edited, NATIVE_UID, name) == _entries(source, NATIVE_UID, name)
        return edited.manifest

    return run


FILES = ("keyed", "changes", "operator", "broadcast", "native", "raw_keyed", "raw_operator")
COPIED: list[Step] = (
    [("operators", "*", "subtasks", "*", "*", "*", "*", field) for field in ("path", "checkpoint_id")]
    + [
        ("operators", "*", "subtasks", "*", raw, field)
        for raw in FILES[-2:]
        for field in ("path", "checkpoint_id")
    ]
    + [
        ("operators", "*", "subtasks", "*", "native", "files", "*", "ref", field)
        for field in ("path", "checkpoint_id")
    ]
)
"""What copying every file into an edited savepoint changes: its path and origin (native
RocksDB files too)."""
NO_CHANGE_FEED: list[Step] = [("operators", "*", "subtasks", "*", "changes")]
REWRITTEN: list[Step] = [("operators", "*", "subtasks", "*", part) for part in FILES]
STATE_S: list[Step] = [
    ("operators", UID, "keyed_states", "s"),
    ("operators", UID, "subtasks", "*", "keyed", "s"),
]
PATHS: dict[str, tuple[Callable[[Path, Job, Manifest], Manifest], list[Step]]] = {
    "bootstrap-append": (_bootstrap(False), [*TOP, *STATE_S]),
    # a version holding only this state: nothing of the base is meant to stay
    "bootstrap-overwrite": (_bootstrap(True), [*TOP, ("operators",)]),
    # a batch's changes are its own: the base's compaction changes stay the base's
    "stream-sink": (_sink, [*TOP, *STATE_S, ("operators", UID, "subtasks", "*", "changes")]),
    "rescale": (_rescale, [*TOP, ("operators", "*", "max_parallelism"), ("operators", "*", "subtasks")]),
    "gc": (_gc, []),
    # an edited savepoint: its files copied, the base's change feed dropped, and the edit
    "edit-remove-state": (
        _edit(SavepointEdits().remove_state(UID, "c")),
        [
            *TOP,
            *COPIED,
            *NO_CHANGE_FEED,
            ("operators", UID, "keyed_states", "c"),
            ("operators", UID, "subtasks", "*", "keyed", "c"),
        ],
    ),
    "edit-set-state": (
        _edit(
            SavepointEdits().set_keyed_state(
                UID, "d", pa.table({"k": [1]}).rename_columns(["key"]).append_column("value", pa.array([7]))
            )
        ),
        [*TOP, *COPIED, *NO_CHANGE_FEED, ("operators", UID, "subtasks", "*", "keyed", "d")],
    ),
    # the job's checkpoints (what process and foreach_batch commit): every subtask's files
    # are written again (keyed as an increment or compacted), the operators' records kept
    "checkpoint-increment": (_increment, [*TOP, *REWRITTEN]),
    "checkpoint-compaction": (_compaction, [*TOP, *REWRITTEN]),
}


@pytest.mark.parametrize("name", sorted(PATHS))
def test_a_path_changes_only_what_it_means_to(tmp_path: Path, name: str) -> None:
    root = tmp_path / "root"
    job, base = write_base(root)
    run, meant = PATHS[name]
    new = run(root, job, base)
    if new.checkpoint_id != base.checkpoint_id and name != "rescale":  # paths as seen from the base
        new = rebase(new, f"chk-{new.checkpoint_id}", f"chk-{base.checkpoint_id}")
    assert unmeant(base, new, meant) == []


def test_the_comparison_sees_a_dropped_nested_field(tmp_path: Path) -> None:
    """The check itself: a subtask's dropped watermark or a file's dropped origin is found."""
    _, base = write_base(tmp_path / "root")
    op = base.operators[0]
    subtasks = list(op.subtasks)
    subtasks[1] = dataclasses.replace(subtasks[1], watermark=None)
    name, files = next(iter(subtasks[0].keyed.items()))
    subtasks[0] = dataclasses.replace(
        subtasks[0], keyed={**subtasks[0].keyed, name: (dataclasses.replace(files[0], checkpoint_id=None),)}
    )
    changed = dataclasses.replace(base, operators=(dataclasses.replace(op, subtasks=tuple(subtasks)),))
    found = unmeant(base, changed, [("operators", "*", "subtasks", "*", "keyed", "nothing")])
    assert f"operators.{op.uid}.subtasks.1.watermark" in found
    assert f"operators.{op.uid}.subtasks.0.keyed.{name}.0.checkpoint_id" in found
    assert f"operators.{base.operators[1].uid}" in found  # an operator dropped


def test_a_derived_version_keeps_the_event_time_watermark_property(tmp_path: Path) -> None:
    """The process runner's watermark (what a restore's event-time TTL continues from) is a
    fact about the state: an append keeps it; properties of the run that wrote the base go."""
    from flinkstate.checkpoint.manifest import METADATA, WATERMARK_PROPERTY

    root = tmp_path / "root"
    _, base = write_base(root)
    marked = dataclasses.replace(base, properties={**base.properties, WATERMARK_PROPERTY: "1500"})
    directory = CheckpointStorage(str(root)).storage.child(f"chk-{base.checkpoint_id}")
    directory.delete(METADATA)
    directory.write_bytes(METADATA, marked.to_bytes())
    for run in (_bootstrap(False), _sink):
        new = run(root, None, marked)  # type: ignore[arg-type]
        assert new.properties[WATERMARK_PROPERTY] == "1500" and "origin" not in new.properties
        assert new.watermark(UID) == 1500
