"""Flink 2.0's savepoints (``_metadata`` version 5, the one release that writes it; fixtures of
FixtureJob made by Flink 2.0.2 in ``tests/fixtures/flink/2.0``): found to be 2.0 from the files,
with the operator uids and names they record, and every state read to the values Flink 2.3's
savepoints of the same job read to (its own fixtures: a second writer of the same values)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from flink_model import FIELDS_DDL, FIXTURES, KEYS, fields, fixture

from flinkstate.checkpoint.flink import read_savepoint

KINDS = ["heap_canonical", "rocksdb_native"]
TYPES = {"v_kryo": "STRUCT<value: BIGINT NOT NULL>", "v_kryo_fields": FIELDS_DDL}
#: Written when the job ran, not as a function of the key.
_WHEN = {"ttl_timestamp"}
OPERATOR_KINDS = {"SPLIT_DISTRIBUTE", "UNION", "BROADCAST"}


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    rows = [{c: v for c, v in r.items() if c not in _WHEN} for r in table.to_pylist()]
    return sorted(rows, key=repr)


@pytest.mark.parametrize("kind", KINDS)
def test_flink_2_0_is_told_by_its_files(kind: str) -> None:
    sp = read_savepoint(str(FIXTURES / "2.0" / kind))
    assert sp.properties["metadata_version"] == "5"
    assert sp.properties["flink_version"] == "2.0"
    assert sp.flink_versions.kryo == 5
    recorded = {(s.operator_uid, s.operator_name) for s in sp.states()}
    assert recorded == {
        ("keyed-states", "KeyedProcess"),
        ("window-sum", "TumblingEventTimeWindows"),
        ("broadcast", "Co-Process-Broadcast"),
        ("operator-states", "Map"),
    }


@pytest.mark.parametrize("kind", KINDS)
def test_every_state_reads_as_flink_2_3_s_savepoint_of_the_same_job(kind: str) -> None:
    old = read_savepoint(str(FIXTURES / "2.0" / kind), types=TYPES)
    new = read_savepoint(str(fixture("2.3", kind)), types=TYPES)
    names = {(s.operator_uid, s.name, s.kind) for s in old.states()}
    assert names == {(s.operator_uid, s.name, s.kind) for s in new.states()}
    keyed = [(uid, name) for uid, name, k in names if k not in OPERATOR_KINDS]
    assert ("keyed-states", "v_kryo_fields") in keyed and ("window-sum", "window-contents") in keyed
    for uid, name in keyed:
        assert _rows(old.keyed_state(uid, name)) == _rows(new.keyed_state(uid, name)), (uid, name)
    for uid, name in {(u, n) for u, n, k in names} - set(keyed):
        assert _rows(old.operator_state(uid, name)) == _rows(new.operator_state(uid, name)), (uid, name)
    got = {r["key"]: r["value"] for r in old.keyed_state("keyed-states", "v_kryo_fields").to_pylist()}
    assert got == {k: pytest.approx(fields(k)) for k in KEYS}
