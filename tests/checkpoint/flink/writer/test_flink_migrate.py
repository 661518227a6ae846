"""1.x → 2.x: MigrateJob's Flink 1.20 savepoints written for Flink 2.3 (``write_savepoint(...,
flink_version="2.3")``) hold what Flink 2.3 itself writes for the same job (the Kryo values'
bytes, the POJO's snapshot and values: its own savepoint in ``fixtures/flink/migrate_heap``), read
back equal to the original; undeclared states are refused, naming the declaration, before any
file is written; :func:`convert_plan` says what happens to each state. Flink 2.3's restore of it:
``test_flink_migrate_restore.py`` (flink tier)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from migrate_model import COUNTED, KEYS, LISTED, TYPES, counted, listed, pojo

from flinkstate.checkpoint.flink import (
    DeclaredTypeError,
    FlinkSavepoint,
    UnsupportedFlinkWriteError,
    convert_plan,
    read_savepoint,
    write_savepoint,
)
from flinkstate.checkpoint.flink.reader.kryo_declared import apply_declarations
from flinkstate.checkpoint.flink.streams.header_read import read_meta_info
from flinkstate.checkpoint.flink.types.declared_read import declarations
from flinkstate.checkpoint.flink.wire.data_read import Cursor
from flinkstate.checkpoint.flink.writer.migrate import declaration_hint

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "flink"
ORIGINALS = ["1.20/migrate_heap", "1.20/migrate_rocksdb"]
#: Flink 2.3's savepoint of the same job.
FLINK_23 = FIXTURES / "migrate_heap"
STATES = {"kryo_listed": listed, "kryo_counted": counted, "pojo_listed": pojo}
#: The declarations of the migrated savepoint's Kryo states.
KRYO_TYPES = {"kryo_listed": LISTED, "kryo_counted": COUNTED}


def _values(sp: FlinkSavepoint, state: str) -> dict[int, object]:
    return {r["key"]: r["value"] for r in sp.state("migrate", state).to_pylist()}


def _raw(sp: FlinkSavepoint, state: str) -> dict[bytes, bytes]:
    return {
        k: v for rows in sp.raw_keyed("migrate", state) for k, v in zip(rows.key, rows.value, strict=True)
    }


def _meta(sp: FlinkSavepoint, state: str) -> bytes:
    found = sp.keyed_info("migrate", state)
    assert found is not None
    return found[1].meta


@pytest.fixture(scope="module", params=ORIGINALS)
def migrated(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    target = tmp_path_factory.mktemp("migrated") / "savepoint"
    source = read_savepoint(str(FIXTURES / request.param), types=TYPES)
    write_savepoint(source, str(target), flink_version="2.3")
    return request.param, target


def test_the_migrated_savepoint_reads_back_as_the_original(migrated: tuple[str, Path]) -> None:
    original_path, target = migrated
    original = read_savepoint(str(FIXTURES / original_path), types=TYPES, flink_version="1.20")
    back = read_savepoint(str(target), types=KRYO_TYPES, flink_version="2.3")
    for state, model in STATES.items():
        assert _values(back, state) == _values(original, state) == {k: model(k) for k in KEYS}


def test_it_holds_the_bytes_flink_2_3_writes_for_the_same_job(migrated: tuple[str, Path]) -> None:
    back, flink = read_savepoint(str(migrated[1])), read_savepoint(str(FLINK_23))
    for state in STATES:
        assert _raw(back, state) == _raw(flink, state)
    assert _meta(back, "pojo_listed") == _meta(flink, "pojo_listed")


def test_what_cannot_be_re_encoded_is_refused_by_name_before_any_file(tmp_path: Path) -> None:
    target = tmp_path / "savepoint"
    cases = {
        "pojo_listed": "types={'pojo_listed': 'STRUCT<tags: ARRAY<STRING>>'}",
        "kryo_listed": "declare its Kryo class MigrateJob$Listed as a STRUCT",
    }
    for state, declaration in cases.items():
        types = {k: v for k, v in TYPES.items() if k != state}
        source = read_savepoint(str(FIXTURES / ORIGINALS[0]), types=types)
        with pytest.raises(UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\]") as exc:
            write_savepoint(source, str(target), flink_version="2.3")
        assert f"state {state!r}" in str(exc.value) and declaration in str(exc.value)
        assert not target.exists()


def test_the_plan_lists_each_state_re_encoded_written_or_refused() -> None:
    declared = read_savepoint(str(FIXTURES / ORIGINALS[0]), types=TYPES)
    plan = {(p.state, p.action) for p in convert_plan(declared, "2.3")}
    timers = {
        ("_timer_state/processing_user-timers", "written"),
        ("_timer_state/event_user-timers", "written"),
    }
    assert plan == {(s, "re-encoded") for s in STATES} | timers
    undeclared = convert_plan(read_savepoint(str(FIXTURES / ORIGINALS[0])), "2.3")
    refused = {p.state: p.detail for p in undeclared if p.action == "refused"}
    assert set(refused) == set(STATES)
    assert "STRUCT<tags: ARRAY<STRING>>" in refused["pojo_listed"]
    # for Flink 1.20 itself nothing is re-encoded: the Kryo and POJO bytes are carried
    same = {(p.state, p.action) for p in convert_plan(declared, "1.20") if not p.state.startswith("_timer")}
    assert same == {(s, "carried") for s in STATES}


def test_a_whole_fixture_plan_names_every_kryo_state_it_refuses() -> None:
    plan = convert_plan(read_savepoint(str(FIXTURES / "1.20" / "heap_canonical")), "2.3")
    refused = sorted(p.state for p in plan if p.action == "refused")
    assert refused == ["v_kryo", "v_kryo_fields"]
    assert {p.action for p in plan} == {"written", "refused"}
    assert "OPERATOR BROADCAST" in {p.kind for p in plan}


def test_a_kryo_class_with_a_serializer_of_its_own_is_refused_by_name(tmp_path: Path) -> None:
    source = read_savepoint(str(FIXTURES / ORIGINALS[0]))
    found = source.keyed_info("migrate", "kryo_listed")
    assert found is not None
    header, info = found
    # its registration (class name, then the serializer definition's kind) given a serializer class
    plain = b"\x00\x11MigrateJob$Listed\x00\x00\x00\x00"
    assert info.meta.count(plain) == 1
    patched = read_meta_info(Cursor(info.meta.replace(plain, plain[:-1] + b"\x01"), "patched"), 0)
    assert info.value.kryo_serializers == ("org.apache.avro.generic.GenericData$Array",)  # Flink's own
    assert patched.value.kryo_serializers == ("MigrateJob$Listed", *info.value.kryo_serializers)
    with pytest.raises(DeclaredTypeError, match=r"MigrateJob\$Listed has a Kryo serializer of its own"):
        apply_declarations(replace(header, states=(patched,)), declarations({"kryo_listed": LISTED}), "w")
    assert "none can: its Kryo class MigrateJob$Listed has a Kryo serializer" in declaration_hint(patched)
    assert "declare its Kryo class" in declaration_hint(info)


@pytest.mark.parametrize(
    "declared, why",
    [
        (
            "STRUCT<nope: ARRAY<STRING>>",
            r"Kryo \(GenericType\) fields are tags: declare them as .*STRUCT<tags",
        ),
        ("BIGINT", r"STRUCT<tags: ARRAY<STRING>>, not int64"),
        (
            "STRUCT<tags: ARRAY<BIGINT>>",
            r"field tags \(Kryo class java.util.List\) is declared .*only a List of String",
        ),
    ],
)
def test_a_pojo_declaration_that_does_not_fit_is_refused(declared: str, why: str) -> None:
    sp = read_savepoint(str(FIXTURES / ORIGINALS[0]), types={"pojo_listed": declared})
    with pytest.raises(DeclaredTypeError, match=r"\[INVALID_OPTION\].*" + why):
        sp.state("migrate", "pojo_listed")


def test_flink_2_s_pojo_list_fields_are_refused_for_flink_1_x(tmp_path: Path) -> None:
    # Flink 1.20 refuses them (StateMigrationException: its POJO's List field is a GenericType)
    target = tmp_path / "savepoint"
    source = read_savepoint(str(FLINK_23), types=KRYO_TYPES)
    with pytest.raises(
        UnsupportedFlinkWriteError, match=r"state 'pojo_listed'.*List fields tags.*Flink 1.20"
    ):
        write_savepoint(source, str(target), flink_version="1.20")
    assert not target.exists()
    assert {p.state: p.action for p in convert_plan(source, "1.20")}["pojo_listed"] == "refused"
    write_savepoint(source, str(target), flink_version="2.0")  # carried as read for 2.x
    assert _raw(read_savepoint(str(target)), "pojo_listed") == _raw(
        read_savepoint(str(FLINK_23)), "pojo_listed"
    )
