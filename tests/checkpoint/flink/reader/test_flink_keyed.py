"""Reading real Flink savepoints and checkpoints (2.3, 1.20, 1.17): every value of every fixture."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from flink_model import (
    ALL,
    CANONICAL,
    CHECKPOINTS,
    FLINK_RANGE,
    HEAP_READABLE,
    KEYS,
    LISTS,
    MAPS,
    METADATA_VERSION,
    NATIVE,
    TTL,
    VALUES,
    VERSIONS,
    fixture,
    made,
    native_format,
    uids,
    windows,
)

from flinkstate.checkpoint.errors import CheckpointError
from flinkstate.checkpoint.flink import FlinkSavepoint, operator_id_hex, read_savepoint
from flinkstate.state.keygroups.assignment import assign_to_key_group
from flinkstate.state.types.mapping import Types


def _readable(version: str, kind: str, state: str) -> bool:
    if kind == "heap_checkpoint":
        return state in HEAP_READABLE[version]
    return True


Versioned = tuple[str, str, FlinkSavepoint]


@pytest.fixture(scope="module", params=made(ALL), ids="-".join)
def savepoint(request: pytest.FixtureRequest) -> Versioned:
    """(Flink version, fixture kind, the savepoint read)."""
    version, kind = request.param
    return version, kind, read_savepoint(str(fixture(version, kind)))


def _check_common(table: pa.Table, state: str) -> None:
    for row in table.to_pylist():
        assert row["key_group"] == assign_to_key_group(row["key"], 128, Types.LONG())
        assert row["namespace"] is None
        if state in TTL:
            assert row["ttl_timestamp"].timestamp() > 1.7e9


@pytest.mark.parametrize("state", sorted(VALUES))
def test_value_states(savepoint: Versioned, state: str) -> None:
    version, kind, sp = savepoint
    if not _readable(version, kind, state):
        with pytest.raises(CheckpointError, match=r"\[(UNSUPPORTED_SERIALIZER|FLINK_UNSUPPORTED)\]"):
            sp.keyed_state("keyed-states", state)
        return
    table = sp.keyed_state("keyed-states", state)
    _check_common(table, state)
    got = {r["key"]: r["value"] for r in table.to_pylist()}
    assert len(got) == table.num_rows == len(KEYS)
    for k in KEYS:
        value = got[k]
        if state == "v_map":
            value = sorted(value)
        expected = VALUES[state](k)
        if isinstance(expected, float):
            assert math.isclose(value, expected)
        else:
            assert value == expected, (k, value, expected)


@pytest.mark.parametrize("state", sorted(LISTS))
def test_list_states(savepoint: Versioned, state: str) -> None:
    version, kind, sp = savepoint
    if not _readable(version, kind, state):
        with pytest.raises(CheckpointError, match=r"\[(UNSUPPORTED_SERIALIZER|FLINK_UNSUPPORTED)\]"):
            sp.keyed_state("keyed-states", state)
        return
    table = sp.keyed_state("keyed-states", state)
    _check_common(table, state)
    got: dict[int, list[object]] = {}
    for row in sorted(table.to_pylist(), key=lambda r: (r["key"], r["position"])):
        assert row["position"] == len(got.setdefault(row["key"], []))
        got[row["key"]].append(row["value"])
    assert got == {k: LISTS[state](k) for k in KEYS}


@pytest.mark.parametrize("state", sorted(MAPS))
def test_map_states(savepoint: Versioned, state: str) -> None:
    version, kind, sp = savepoint
    if not _readable(version, kind, state):
        pytest.skip(
            "not readable from this fixture kind (behind a Kryo state in a heap checkpoint): "
            "its typed error is checked in test_value_states"
        )
    table = sp.keyed_state("keyed-states", state)
    _check_common(table, state)
    got: dict[int, dict[object, object]] = {}
    for row in table.to_pylist():
        got.setdefault(row["key"], {})[row["user_key"]] = row["value"]
    assert got == {k: MAPS[state](k) for k in KEYS}
    assert table.num_rows == sum(len(MAPS[state](k)) for k in KEYS)


def test_kryo_is_raw_bytes_named_in_metadata(savepoint: Versioned) -> None:
    version, kind, sp = savepoint
    meta = {(s.operator_id, s.name): s for s in sp.states()}
    kryo = meta[(operator_id_hex("keyed-states"), "v_kryo")]
    assert not kryo.decodable and kryo.serializer == "FixtureJob$Opaque"
    assert kryo.value_type == "RAW(FixtureJob$Opaque)"
    if _readable(version, kind, "v_kryo"):
        table = sp.keyed_state("keyed-states", "v_kryo")
        assert table.schema.field("value").type == pa.binary()
        assert table.num_rows == 20 and all(len(v) > 0 for v in table.column("value").to_pylist())


def test_window_state(savepoint: Versioned) -> None:
    _, _, sp = savepoint
    table = sp.keyed_state("window-sum", "window-contents")
    assert table.schema.field("namespace").type == pa.struct([("start", pa.int64()), ("end", pa.int64())])
    got = {}
    for row in table.to_pylist():
        assert row["key_group"] == assign_to_key_group(row["key"], 256, Types.STRING())
        assert row["namespace"]["end"] - row["namespace"]["start"] == 3_600_000
        got[(row["key"], row["namespace"]["start"])] = row["value"]
    assert got == windows()


def test_operator_list_and_union_state(savepoint: Versioned) -> None:
    _, _, sp = savepoint
    rows = sp.operator_state("operator-states", "op_list").to_pylist()
    assert rows == [{"subtask": s, "position": i, "value": s * 100 + i} for s in (0, 1) for i in range(3)]
    union = sp.operator_state("operator-states", "op_union").to_pylist()
    assert union == [{"subtask": s, "position": 0, "value": f"s{s}"} for s in (0, 1)]


def test_broadcast_state(savepoint: Versioned) -> None:
    _, _, sp = savepoint
    rows = sp.operator_state("broadcast", "rules").to_pylist()
    expected = sorted((s, f"r{i}", 7 * i) for s in (0, 1) for i in range(4))
    assert sorted((r["subtask"], r["key"], r["value"]) for r in rows) == expected


def test_metadata(savepoint: Versioned) -> None:
    version, kind, sp = savepoint
    # Found by uid: recorded in 2.x's _metadata; 1.x's records only the uid's hash, the operator id.
    ops = {uid: sp.operator(uid) for uid in ("keyed-states", "window-sum", "broadcast", "operator-states")}
    assert ops["keyed-states"].parallelism == 2 and ops["keyed-states"].max_parallelism == 128
    assert ops["window-sum"].max_parallelism == 256
    assert sp.operator(ops["keyed-states"].operator_id) is ops["keyed-states"]
    assert ops["keyed-states"].operator_id == operator_id_hex("keyed-states")
    assert {o.uid for o in ops.values()} == (set(ops) if uids(version) else {""})
    props = sp.properties
    assert props["snapshot"] == ("checkpoint" if kind in CHECKPOINTS else "savepoint")
    assert props["format"] == ("native" if native_format(version, kind) else "canonical")
    assert props["metadata_version"] == str(METADATA_VERSION[version])
    assert props["flink_version"] == FLINK_RANGE[version]
    table = sp.metadata_table()
    assert set(table.column("flink_version").to_pylist()) == {FLINK_RANGE[version]}
    uid_of = {o.operator_id: uid for uid, o in ops.items()}
    names = {
        (uid_of.get(op_id), name)
        for op_id, name in zip(
            table.column("operator_id").to_pylist(), table.column("name").to_pylist(), strict=True
        )
    }
    expected = {("keyed-states", s) for s in [*VALUES, *LISTS, *MAPS, "v_kryo"]}
    assert expected | {("window-sum", "window-contents"), ("broadcast", "rules")} <= names
    recorded = set(table.column("operator_uid").to_pylist())
    assert recorded == set(ops) if uids(version) else recorded == {""}
    ttl = dict(zip(table.column("name").to_pylist(), table.column("ttl").to_pylist(), strict=True))
    assert {n for n, t in ttl.items() if t} == TTL


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", CANONICAL)
def test_key_group_pushdown_reads_only_needed_files(
    version: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flinkstate.checkpoint.flink.metadata import metadata_read as metadata

    sp = read_savepoint(str(fixture(version, kind)))
    full = sp.keyed_state("keyed-states", "v_string")
    group = full.column("key_group")[0].as_py()
    opened: list[str] = []
    original = metadata.StreamHandle.read

    def spy(self: metadata.StreamHandle, directory: str, storage: object = None) -> bytes:
        opened.append(self.name)
        return original(self, directory, storage)  # type: ignore[arg-type]

    monkeypatch.setattr(metadata.StreamHandle, "read", spy)
    part = sp.keyed_state("keyed-states", "v_string", key_groups=[group])
    assert set(part.column("key_group").to_pylist()) == {group}
    assert part.num_rows == sum(1 for g in full.column("key_group").to_pylist() if g == group)
    op = sp.operator("keyed-states")
    owner = [s.managed_keyed for s in op.subtasks if s.managed_keyed and group in s.managed_keyed.key_groups]
    assert len(opened) == 1 and owner[0].stream is not None and opened == [owner[0].stream.name]


@pytest.mark.parametrize(("version", "kind"), made(NATIVE))
@pytest.mark.parametrize("state", ["l_long", "m_string_long", "ttl_list"])
def test_native_key_group_pushdown_gives_the_same_rows(version: str, kind: str, state: str) -> None:
    sp = read_savepoint(str(fixture(version, kind)))
    full = sp.keyed_state("keyed-states", state).to_pylist()
    groups = sorted({r["key_group"] for r in full})
    wanted = {groups[0], groups[-1], 200 % 128}
    part = sp.keyed_state("keyed-states", state, key_groups=wanted).to_pylist()
    assert part == [r for r in full if r["key_group"] in wanted] and part
