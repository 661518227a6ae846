"""Declared types: Kryo classes as structs (SqlJob.Rich, FixtureJob.Opaque) and PyFlink state."""

from __future__ import annotations

import math
import pickle
import random
import struct

import pyarrow as pa
import pytest
from flink_model import FIELDS_DDL, KEYS, LISTS, MAPS, PYFLINK_VERSIONS, VALUES, VERSIONS, fixture, told
from kryo_model import encode, string
from sql_model import RICH_DDL, rich

from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.checkpoint.flink.types.declared_read import StateDeclaration, parse_type
from flinkstate.checkpoint.flink.types.kryo_read import KryoReader, kryo_string
from flinkstate.state.errors import FlinkStateError
from flinkstate.state.types.mapping import Types, is_java_char, to_type_info

SQL_KINDS = ["sql_heap", "sql_rocksdb", "sql_heap_checkpoint"]
OPAQUE = "STRUCT<value: BIGINT NOT NULL>"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", SQL_KINDS)
def test_kryo_class_decodes_with_a_declared_struct(version: str, kind: str) -> None:
    """Flink 2.x's Kryo 5 bytes and 1.x's Kryo 2 ones (ratio, a Double: big-endian there)."""
    path = str(fixture(version, kind))
    if told(version):
        with pytest.raises(FlinkStateError, match=r"\[FLINK_VERSION_REQUIRED\].*k_rich"):
            read_savepoint(path, types={"k_rich": RICH_DDL}).keyed_state("kryo-states", "k_rich")
    sp = read_savepoint(path, types={"k_rich": RICH_DDL}, **told(version))
    table = sp.keyed_state("kryo-states", "k_rich")
    assert table.schema.field("value").type == parse_type(RICH_DDL)
    got = {r["key"]: r["value"] for r in table.to_pylist()}
    assert got == {k: rich(k) for k in range(20)}
    meta = {s.name: s for s in sp.states()}["k_rich"]
    assert meta.decodable and meta.serializer == "SqlJob$Rich"


@pytest.mark.parametrize("version", VERSIONS)
def test_heap_checkpoint_states_after_a_kryo_state_need_its_declaration(version: str) -> None:
    path = str(fixture(version, "sql_heap_checkpoint"))
    with pytest.raises(FlinkStateError, match=r"\[UNSUPPORTED_SERIALIZER\].*k_rich"):
        read_savepoint(path).keyed_state("kryo-states", "k_after")
    sp = read_savepoint(path, types={"k_rich": RICH_DDL}, **told(version))
    assert {r["key"]: r["value"] for r in sp.keyed_state("kryo-states", "k_after").to_pylist()} == {
        k: f"a{k}" for k in range(20)
    }
    rows = sp.keyed_state("kryo-states", "k_after_list").to_pylist()
    lists: dict[int, list[int]] = {}
    for r in sorted(rows, key=lambda r: (r["key"], r["position"])):
        lists.setdefault(r["key"], []).append(r["value"])
    assert lists == {k: [k, k + 20] for k in range(20)}


@pytest.mark.parametrize("version", VERSIONS)
def test_fixture_job_heap_checkpoint_reads_every_state_with_opaque_declared(version: str) -> None:
    types = {"v_kryo": OPAQUE, "v_kryo_fields": FIELDS_DDL}
    sp = read_savepoint(str(fixture(version, "heap_checkpoint")), types=types)
    kryo = sp.keyed_state("keyed-states", "v_kryo").to_pylist()
    assert {r["key"]: r["value"] for r in kryo} == {k: {"value": k} for k in KEYS}
    for state, expect in VALUES.items():
        got = {r["key"]: r["value"] for r in sp.keyed_state("keyed-states", state).to_pylist()}
        for k in KEYS:
            want, value = expect(k), got[k]
            value = sorted(value) if state == "v_map" else value
            assert math.isclose(value, want) if isinstance(want, float) else value == want, (state, k)
    for state, expect in LISTS.items():
        rows = sorted(
            sp.keyed_state("keyed-states", state).to_pylist(), key=lambda r: (r["key"], r["position"])
        )
        for k in KEYS:
            assert [r["value"] for r in rows if r["key"] == k] == expect(k), state
    for state, expect in MAPS.items():
        rows = sp.keyed_state("keyed-states", state).to_pylist()
        for k in KEYS:
            assert {r["user_key"]: r["value"] for r in rows if r["key"] == k} == expect(k), state


@pytest.mark.parametrize("version", VERSIONS)
def test_a_declaration_that_does_not_fit_is_an_invalid_option(version: str) -> None:
    path = str(fixture(version, "sql_heap"))
    wrong = (
        "STRUCT<id: BIGINT, count: INT NOT NULL, name: STRING, boxed: BIGINT, ratio: DOUBLE, flag: BOOLEAN>"
    )
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\].*k_rich"):
        read_savepoint(path, types={"k_rich": wrong}, **told(version)).keyed_state("kryo-states", "k_rich")
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\].*k_after.*comes from the savepoint"):
        read_savepoint(path, types={"k_after": "STRING"}).keyed_state("kryo-states", "k_after")
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\].*STRUCT"):
        read_savepoint(path, types={"k_rich": "BIGINT"}).keyed_state("kryo-states", "k_rich")
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\].*field when"):
        sp = read_savepoint(path, types={"k_rich": "STRUCT<when: DATE>"}, **told(version))
        sp.keyed_state("kryo-states", "k_rich")
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\]"):
        read_savepoint(path, types={"k_rich": "STRUCT<id BIGINT"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bigint", pa.int64()),
        ("DECIMAL(12, 3)", pa.decimal128(12, 3)),
        ("ARRAY<STRING>", pa.list_(pa.string())),
        ("MAP<STRING, INT>", pa.map_(pa.string(), pa.int32())),
        (
            "STRUCT<a: INT NOT NULL, b STRING>",
            pa.struct([pa.field("a", pa.int32(), False), ("b", pa.string())]),
        ),
        ("CHAR(3)", pa.string()),
    ],
)
def test_ddl_types(text: str, expected: pa.DataType) -> None:
    assert parse_type(text) == expected


def test_char_is_a_java_char_and_char_n_a_string() -> None:
    assert parse_type("char") == Types.CHAR()
    t = parse_type("STRUCT<c: CHAR NOT NULL, d: CHAR, e: CHAR(1)>")
    assert isinstance(t, pa.StructType)
    assert [is_java_char(t.field(i)) for i in range(3)] == [True, True, False]
    assert [t.field(i).nullable for i in range(3)] == [False, True, True]
    # The same declaration as a Row (a PyFlink or Flink Row state) is a Row of CHAR fields.
    assert to_type_info(t) == Types.ROW_NAMED(["c", "d", "e"], [Types.CHAR(), Types.CHAR(), Types.STRING()])
    assert to_type_info(parse_type("ARRAY<CHAR>")) == Types.LIST(Types.CHAR())
    assert parse_type("MAP<STRING, CHAR>") == Types.MAP(Types.STRING(), Types.CHAR())


@pytest.mark.parametrize(
    "text", ["", "STRUCT<", "WIDGET", "DECIMAL(50, 2)", "INT INT", "ARRAY<INT", "STRUCT<a: INT NOT>"]
)
def test_bad_ddl_types(text: str) -> None:
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\]"):
        parse_type(text)


#: Java chars a Kryo char field holds: NUL, ASCII, Latin-1, the BMP's ends (no surrogate halves).
CHARS = ["\x00", "a", "\u00e9", "\u6f22", "\u20ac", "\ud7ff", "\ue000", "\uffff"]


@pytest.mark.parametrize("kryo", [2, 5])
def test_kryo_reader_against_the_model_on_random_values(kryo: int) -> None:
    t = parse_type(
        "STRUCT<a: BIGINT NOT NULL, b: INT NOT NULL, c: SMALLINT NOT NULL, d: TINYINT NOT NULL, "
        "e: BOOLEAN NOT NULL, f: FLOAT NOT NULL, g: DOUBLE NOT NULL, h: STRING, i: BIGINT, j: INT, "
        "k: DOUBLE, l: CHAR NOT NULL, m: CHAR>"
    )
    reader = KryoReader(t, "x.Y", "state s", kryo)
    rng = random.Random(7)
    texts = [
        None,
        "",
        "a",
        "ab",
        "x" * 40,
        "\u00e9\u6f22\U0001f600",
        "mixed ascii \u20ac",
        "\x00nul",
        "y" * 70,
    ]
    for _ in range(400):
        value = {
            "a": rng.choice([0, -1, 1, 2**63 - 1, -(2**63), rng.randint(-(2**63), 2**63 - 1)]),
            "b": rng.choice([0, -1, 2**31 - 1, -(2**31), rng.randint(-(2**31), 2**31 - 1)]),
            "c": rng.randint(-(2**15), 2**15 - 1),
            "d": rng.randint(-128, 127),
            "e": rng.random() < 0.5,
            "f": struct.unpack("<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0],
            "g": rng.uniform(-1e300, 1e300),
            "h": rng.choice(texts),
            "i": rng.choice([None, rng.randint(-(2**63), 2**63 - 1)]),
            "j": rng.choice([None, rng.randint(-(2**31), 2**31 - 1)]),
            "k": rng.choice([None, rng.random()]),
            "l": rng.choice(CHARS),
            "m": rng.choice([None, *CHARS]),
        }
        raw = encode(t, value, kryo=kryo)
        assert reader.from_bytes(raw) == value
    assert reader.from_bytes(encode(t, None, kryo=kryo)) is None


def test_a_kryo_char_is_two_bytes_in_the_kryo_versions_byte_order() -> None:
    t = parse_type("STRUCT<c: CHAR NOT NULL, d: CHAR>")
    value = {"c": "\u6f22", "d": "A"}
    assert encode(t, value, kryo=5)[2:] == b"\x22\x6f" + b"\x01\x41\x00"
    assert encode(t, value, kryo=2)[2:] == b"\x6f\x22" + b"\x01\x00\x41"
    for kryo in (2, 5):
        assert KryoReader(t, "x.Y", "state s", kryo).from_bytes(encode(t, value, kryo=kryo)) == value
    half = b"\x57\x01" + b"\x00\xd8" + b"\x00"  # a lone surrogate: no string holds it
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\].*surrogate"):
        KryoReader(t, "x.Y", "state s", 5).from_bytes(half)


def test_kryo_strings() -> None:
    for text in [None, "", "a", "ab", "\u00e9", "\U0001f600" * 3, "z" * 100, "\u6f22" * 30]:
        raw = string(text)
        assert kryo_string(raw + b"tail", 0) == (text, len(raw))


def test_kryo_truncated_value_is_an_invalid_option() -> None:
    t = parse_type(RICH_DDL)
    reader = KryoReader(t, "SqlJob$Rich", "state k_rich")
    raw = encode(t, rich(5))
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\].*state k_rich"):
        reader.from_bytes(raw[:-3])
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\].*left over"):
        reader.from_bytes(raw + b"\x00")
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\].*class id 9 where earlier values had 85"):
        reader.from_bytes(encode(t, rich(5), class_id=9))


@pytest.mark.parametrize("version", PYFLINK_VERSIONS)
def test_pyflink_state_by_its_python_name(version: str) -> None:
    types = {
        "py_long": "BIGINT",
        "py_string": "STRING",
        "py_list": StateDeclaration("BIGINT", kind="list"),
        "py_map": StateDeclaration("BIGINT", "STRING"),
        "py_pickled": "PICKLED",
    }
    path = str(fixture(version, "pyflink"))
    sp = read_savepoint(path, types=types, allow_pickle=True)
    keys = range(10)
    assert {r["key"]: r["value"] for r in sp.keyed_state("py-states", "py_long").to_pylist()} == {
        k: 11 * k for k in keys
    }
    assert sp.schema("py-states", "py_string").field("value").type == pa.string()
    assert {r["key"]: r["value"] for r in sp.keyed_state("py-states", "py_string").to_pylist()} == {
        k: f"py{k}" for k in keys
    }
    rows = sorted(sp.keyed_state("py-states", "py_list").to_pylist(), key=lambda r: (r["key"], r["position"]))
    assert [(r["key"], r["position"], r["value"]) for r in rows] == [
        (k, p, k + p) for k in keys for p in range(2)
    ]
    maps = sp.keyed_state("py-states", "py_map").to_pylist()
    assert {(r["key"], r["user_key"], r["value"]) for r in maps} == {(k, "a", k) for k in keys}
    pickled = sp.keyed_state("py-states", "py_pickled").to_pylist()
    assert {r["key"]: pickle.loads(r["value"]) for r in pickled} == {k: {"k": k} for k in keys}
    with pytest.raises(FlinkStateError, match=r"\[PICKLE_NOT_ALLOWED\]"):
        read_savepoint(path, types=types).keyed_state("py-states", "py_pickled")
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\].*declare its type"):
        read_savepoint(path).keyed_state("py-states", "py_long")
    with pytest.raises(FlinkStateError, match=r"\[INVALID_OPTION\].*py_string"):
        read_savepoint(path, types={"py_string": "BIGINT"}).keyed_state("py-states", "py_string")
