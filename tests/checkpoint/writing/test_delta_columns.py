"""A delta file's row groups are built from columns made once for every changed key group and
sliced per key group. The model: building each key group's table on its own (deletes, then
upserts with ``op``), as increments were first written. Realistic changes come from a live
backend (every state kind, namespaces, TTL, removes), at a max parallelism with key groups
past one byte."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from incremental_ops import Workload

from flinkstate.checkpoint.arrow_codec import to_arrow
from flinkstate.checkpoint.format import keyed_schema, storage_table
from flinkstate.checkpoint.writing.increments import OP, _changed_groups, changes_tables, write_changes
from flinkstate.state import AbstractKeyedStateBackend, KeyGroupRange, assign_to_key_group
from flinkstate.state.keyed.snapshot import ChangedEntries, KeyedStateSnapshot, StateColumns, StateMetaInfo
from flinkstate.state.ttl.time import ManualTimeProvider
from flinkstate.state.types.mapping import TypeInformation


def _model_deletes(schema: pa.Schema, meta: StateMetaInfo, key_type: TypeInformation, kg: int,
                   ce: ChangedEntries) -> pa.Table:  # fmt: skip
    n = len(ce.deletes)
    arrays: dict[str, pa.Array] = {
        "key_group": pa.repeat(pa.scalar(kg, pa.int32()), n),
        "key": to_arrow(ce.deletes.keys, key_type),
        "op": pa.repeat(pa.scalar(1, pa.int8()), n),
    }
    if meta.namespace_type is not None:
        arrays["namespace"] = to_arrow(ce.deletes.namespaces or [None] * n, meta.namespace_type)
    return pa.Table.from_arrays([arrays.get(f.name, pa.nulls(n, f.type)) for f in schema], schema=schema)


def _model_groups(meta: StateMetaInfo, key_type: TypeInformation,
                  groups: list[tuple[int, ChangedEntries]]) -> list[tuple[int, pa.Table]]:  # fmt: skip
    """Each key group's table built on its own."""
    stored = keyed_schema(meta, key_type)
    schema = stored.append(OP)
    out = []
    for kg, ce in groups:
        if not len(ce):
            continue
        parts = []
        if len(ce.deletes):
            parts.append(_model_deletes(schema, meta, key_type, kg, ce))
        if len(ce.upserts):
            up = storage_table(meta, key_type, kg, ce.upserts, stored)
            up = up.append_column(OP, pa.repeat(pa.scalar(0, pa.int8()), up.num_rows))
            parts.append(pa.Table.from_arrays(up.columns, schema=schema))
        out.append((kg, pa.concat_tables(parts)))
    return out


def _check(meta: StateMetaInfo, key_type: TypeInformation, groups: list[tuple[int, ChangedEntries]]) -> int:
    """The sliced row groups and the written file against the model; returns the rows."""
    want = _model_groups(meta, key_type, groups)
    schema, tables = changes_tables(meta, key_type, groups)
    got = list(tables)
    assert schema == keyed_schema(meta, key_type).append(OP)
    assert [kg for kg, _ in got] == [kg for kg, _ in want]
    for (kg, g), (_, w) in zip(got, want, strict=True):
        assert g.schema == w.schema, kg
        assert g.equals(w), kg
    written = write_changes(meta, key_type, groups)
    assert written.key_groups == {kg: (i, t.num_rows) for i, (kg, t) in enumerate(want)}
    pf = pq.ParquetFile(pa.BufferReader(written.data))
    for i, (_, w) in enumerate(want):
        assert pf.read_row_group(i).equals(w)
    return written.rows


def _groups_of(snapshot: KeyedStateSnapshot, name: str) -> list[tuple[int, ChangedEntries]]:
    assert snapshot.changes is not None
    return list(_changed_groups(snapshot.states[name], name, snapshot, snapshot.changes))


@pytest.mark.parametrize(("max_parallelism", "first"), [(32, 8), (1024, 250)])
def test_sliced_row_groups_are_the_per_key_group_model(
    make_backend: Any, max_parallelism: int, first: int
) -> None:
    clock = ManualTimeProvider(1_000)
    rng = KeyGroupRange(first, first + 23)  # 1024: key groups past one byte
    backend: AbstractKeyedStateBackend = make_backend(
        max_parallelism=max_parallelism, key_group_range=rng, time_provider=clock
    )
    keys = [k for k in range(20_000) if assign_to_key_group(k, max_parallelism) in rng][:200]
    work = Workload(5, keys, clock)
    backend.snapshot_for_checkpoint(1).release()  # recording starts
    rows = 0
    for epoch in range(2, 6):
        work.run(backend, 1000)
        with backend.snapshot_for_checkpoint(epoch) as snapshot:
            assert snapshot.key_type is not None
            for name, state in snapshot.states.items():
                groups = _groups_of(snapshot, name)
                groups.insert(
                    len(groups) // 2,
                    (rng.start, ChangedEntries(StateColumns([], None, []), StateColumns([], None, []))),
                )
                rows += _check(state.meta, snapshot.key_type, groups)
                deletes_only = [
                    (kg, ChangedEntries(ce.deletes, StateColumns([], None, []))) for kg, ce in groups
                ]
                _check(state.meta, snapshot.key_type, deletes_only)
            assert snapshot.changes is not None
            snapshot.changes.confirm(epoch)
    assert rows > 500  # the workload changed much in every epoch


def test_no_changes_make_an_empty_delta() -> None:
    from flinkstate.state import HeapKeyedStateBackend, Types, ValueStateDescriptor

    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    backend.get_state(ValueStateDescriptor("v", Types.LONG()))
    with backend.snapshot_for_checkpoint(1) as snapshot:
        meta = snapshot.states["v"].meta
    empty = ChangedEntries(StateColumns([], None, []), StateColumns([], None, []))
    assert _check(meta, Types.LONG(), []) == 0
    assert _check(meta, Types.LONG(), [(3, empty), (9, empty)]) == 0
