"""The metadata view: one row per operator and state of a checkpoint."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from flinkstate.state.operator import OperatorStateMode

from .schemas import METADATA_SCHEMA


def _type_text(t: Any) -> str | None:
    return None if t is None else str(t)


def _files(refs: list[Any]) -> dict[str, Any]:
    return {
        "rows": sum(r.rows for r in refs),
        "bytes": sum(r.size for r in refs),
        "files": len(refs),
        "delta_files": sum(1 for r in refs if r.delta),
        "file_checkpoints": sorted({r.checkpoint_id for r in refs if r.checkpoint_id is not None}),
    }


def metadata_table(manifest: Any, checkpoint_id: int) -> pa.Table:
    """One row per operator and state."""
    rows: list[dict[str, Any]] = []
    kind = "savepoint" if manifest.kind == "savepoint" else "incremental" if manifest.incremental else "full"
    for op in manifest.operators:
        base = {
            "checkpoint_type": kind,
            "checkpoint_id": checkpoint_id,
            "operator": op.uid,
            "parallelism": op.parallelism,
            "max_parallelism": op.max_parallelism,
        }
        for meta in op.keyed_states:
            refs = [r for st in op.subtasks for r in st.keyed.get(meta.name, ())]
            refs += [f.ref for st in op.subtasks if st.native for f in st.native.state_files(meta.name)]
            types = (op.key_type, meta.value_type, meta.user_key_type, meta.namespace_type)
            row = {
                "state": meta.name,
                "kind": meta.kind.value,
                "key_type": _type_text(op.key_type),
                "namespace_type": _type_text(meta.namespace_type),
                "user_key_type": _type_text(meta.user_key_type),
                "value_type": str(meta.value_type),
                "ttl": None if meta.ttl is None else _ttl_text(meta.ttl),
                "pickled": any(t is not None and t.is_pickled for t in types),
                **_files(refs),
            }
            rows.append({**base, **row})
        for info in op.operator_states:
            broadcast = info.mode is OperatorStateMode.BROADCAST
            refs = [
                r
                for st in op.subtasks
                for r in (st.broadcast if broadcast else st.operator).get(info.name, ())
            ]
            row = {
                "state": info.name,
                "kind": {"split": "split list", "union": "union list", "broadcast": "broadcast"}[
                    info.mode.value
                ],
                "key_type": None,
                "namespace_type": None,
                "user_key_type": _type_text(info.user_key_type),
                "value_type": str(info.value_type),
                "ttl": None,
                "pickled": info.pickled,
                **_files(refs),
            }
            rows.append({**base, **row})
    return pa.Table.from_pylist(rows, schema=METADATA_SCHEMA)


def _ttl_text(ttl: Any) -> str:
    parts = [
        f"{ttl.ttl_ms} ms",
        ttl.update_type.name,
        ttl.state_visibility.name,
        ttl.time_characteristic.name,
    ]
    return ", ".join(parts)
