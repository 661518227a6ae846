"""A Flink savepoint as one of our savepoints: ``flinkstate convert SRC DST --to flinkstate``.

Every operator is checked first (:func:`_check`); then each operator's subtasks are restored as
a restore at the savepoint's own layout would (keyed state and timers through
:meth:`FlinkSavepoint.keyed_backend`; operator state as each subtask wrote it, so a union state
is held once: :func:`.restore.operator_states`) and written through the one commit path of our
savepoints (:func:`~flinkstate.checkpoint.begin_savepoint`): data files first, the manifest
last; a failure deletes what was written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flinkstate.state.operator import OperatorStateBackend

from ...reading.restore import CompletedCheckpoint
from ...writing.checkpoints import begin_savepoint
from ..errors import UnsupportedFlinkWriteError
from ..metadata.metadata_read import OperatorMeta
from ..metadata.operator_id import operator_id_hex
from .restore import operator_states
from .savepoint import FlinkSavepoint
from .timers import timer_meta

CONVERTED_PROPERTY = "flinkstate.converted_from_flink_checkpoint"
"""The property recording the Flink checkpoint id a converted savepoint was made from."""
CONVERTED_VERSION_PROPERTY = "flinkstate.converted_from_flink_version"
"""The property recording the Flink version (or range of releases) that wrote it."""


def import_savepoint(
    source: FlinkSavepoint,
    target: str,
    storage: Mapping[str, Any] | None = None,
    uids: Iterable[str] = (),
    operators: Iterable[str] | None = None,
) -> CompletedCheckpoint:
    """Write the Flink savepoint ``source`` as one of our savepoints in the new directory
    ``target`` (``storage``: its fsspec options) and return it.

    Operators keep their uids; one whose metadata records only its id (the uid's hash, as in
    metadata version 3) is named by the uid in ``uids`` that hashes to it, else by its hex id.
    ``operators``: those to convert (uids, ids or names; default: all with state).
    Timers arrive as our timer service keeps them (:mod:`.timers`: a KeyedProcessFunction's
    fire in the process runner). Raw state, TTL states and timers in namespaces our timers
    cannot hold cannot be converted yet: ``[FLINK_UNSUPPORTED]`` naming the operator (and
    state or timer service), before any file is written.
    """
    by_hash = {operator_id_hex(uid): uid for uid in uids}
    chosen = list(source.operators) if operators is None else [source.operator(r) for r in operators]
    names = [op.uid or by_hash.get(op.operator_id, op.operator_id) for op in chosen]
    for op, name in zip(chosen, names, strict=True):
        _check(source, op, name)
    pending = begin_savepoint(target, storage, source.meta.checkpoint_id)
    try:
        for op, name in zip(chosen, names, strict=True):
            has_keyed = source.keyed_header(op.operator_id) is not None
            p, max_p = op.parallelism, op.max_parallelism
            written = operator_states(source, op.operator_id)
            for index in range(p):
                keyed = source.keyed_backend(op.operator_id, index, p) if has_keyed else None
                operator = OperatorStateBackend(written[index])  # as written: a union state once
                pending.write_subtask(name, index, p, max_p, keyed=keyed, operator=operator)
    except BaseException:
        pending.abort()
        raise
    return pending.commit(
        {
            CONVERTED_PROPERTY: str(source.meta.checkpoint_id),
            CONVERTED_VERSION_PROPERTY: source.flink_versions.describe(),
        }
    )


def _check(source: FlinkSavepoint, op: OperatorMeta, name: str) -> None:
    """Refuse what of operator ``op`` (called ``name``) cannot be converted."""
    if any(s.raw_keyed or s.raw_operator for s in op.subtasks):
        raise UnsupportedFlinkWriteError(f"operator {name!r}: raw state cannot be converted yet")
    header = source.keyed_header(op.operator_id)
    for s in header.states if header is not None else ():
        if s.is_timer:
            timer_meta(s, f"operator {name!r}")
            continue
        if s.ttl:
            raise UnsupportedFlinkWriteError(
                f"operator {name!r}, state {s.name!r}: a TTL state cannot be converted yet (its TTL "
                "is the restoring job's, not in the savepoint); remove it first (edit --remove-state)"
            )
        value = s.value.inner or s.value
        if not value.decodable or (s.user_key is not None and not s.user_key.decodable):
            raise UnsupportedFlinkWriteError(
                f"operator {name!r}, state {s.name!r}: {value.describe()} cannot be decoded, so it "
                "cannot be converted (declare its type: read_savepoint(types=...)); a Flink "
                "savepoint written back keeps it as it is"
            )
