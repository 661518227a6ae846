"""The Kryo encoder (:mod:`flinkstate.checkpoint.flink.types.kryo_write`): byte for byte what Flink
wrote, the reader's inverse on random values, and Kryo states set from rows."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from flink_model import FIELDS_DDL, FIXTURES, KEYS, VERSIONS, fixture
from kryo_model import encode, uvarint
from sql_model import RICH_DDL

from flinkstate.checkpoint import SavepointEdits
from flinkstate.checkpoint.flink import FlinkSavepoint, edit_savepoint, read_savepoint
from flinkstate.checkpoint.flink.errors import UnsupportedFlinkWriteError
from flinkstate.checkpoint.flink.types.declared_read import parse_type
from flinkstate.checkpoint.flink.types.kryo_write import KryoWriter, state_class_header
from flinkstate.state.errors import FlinkStateError
from flinkstate.state.types.mapping import char_field

OPAQUE = "STRUCT<value: BIGINT NOT NULL>"  # FixtureJob's Kryo class, declared
OLD = [v for v in VERSIONS if v != "2.3"]  # Flink 1.x: Kryo 2
KRYO_STATES = [
    (fixture, "keyed-states", "v_kryo", OPAQUE, "FixtureJob$Opaque")
    for fixture in ("heap_canonical", "heap_snappy", "rocksdb_canonical", "rocksdb_native")
] + [(fixture, "kryo-states", "k_rich", RICH_DDL, "SqlJob$Rich") for fixture in ("sql_heap", "sql_rocksdb")]


@pytest.mark.parametrize(("fixture", "op", "state", "ddl", "java_class"), KRYO_STATES)
def test_encode_of_decode_is_the_bytes_flink_wrote(
    fixture: str, op: str, state: str, ddl: str, java_class: str
) -> None:
    sp = read_savepoint(str(FIXTURES / fixture), types={state: ddl})
    values = [v for rows in sp.raw_keyed(op, state) for v in rows.value]
    assert len(values) >= 10
    header = state_class_header(values, "VALUE", False, java_class, state)
    writer = KryoWriter(parse_type(ddl), java_class, header, state, 5)
    for v in values:
        assert writer.to_bytes(writer.from_bytes(v)) == v


@pytest.mark.parametrize("version", OLD)
@pytest.mark.parametrize(
    ("state", "ddl", "java_class"),
    [("v_kryo", OPAQUE, "FixtureJob$Opaque"), ("v_kryo_fields", FIELDS_DDL, "FixtureJob$Fields")],
)
def test_kryo_2_encode_of_decode_is_the_bytes_flink_1_wrote(
    version: str, state: str, ddl: str, java_class: str
) -> None:
    """Kryo 2's encoder (a Flink 1.x target) against Flink 1.17's and 1.20's own bytes; Kryo 5's
    differs wherever a short, float or double is written."""
    sp = read_savepoint(str(fixture(version, "heap_canonical")), types={state: ddl})
    values = [v for rows in sp.raw_keyed("keyed-states", state) for v in rows.value]
    assert len(values) == len(KEYS)
    header = state_class_header(values, "VALUE", False, java_class, state)
    kryo2, kryo5 = (KryoWriter(parse_type(ddl), java_class, header, state, k) for k in (2, 5))
    for v in values:
        assert kryo2.to_bytes(kryo2.from_bytes(v)) == v
        if state == "v_kryo_fields":
            assert kryo5.to_bytes(kryo2.from_bytes(v)) != v


RANDOM = pa.struct(
    [
        pa.field("l", pa.int64(), nullable=False),
        pa.field("i", pa.int32(), nullable=False),
        pa.field("s", pa.int16(), nullable=False),
        pa.field("b", pa.int8(), nullable=False),
        pa.field("z", pa.bool_(), nullable=False),
        pa.field("d", pa.float64(), nullable=False),
        pa.field("f", pa.float32(), nullable=True),
        char_field("c", nullable=False),
        char_field("boxed_char"),
        pa.field("boxed", pa.int64(), nullable=True),
        pa.field("text", pa.string()),
        pa.field("Upper", pa.int32(), nullable=True),  # sorts before the lower-case names
    ]
)
_CHARS = "aZ09 ~é߿ࠀ€中\U0001f600\U00010000\U0010ffff"


def _random_value(rng: random.Random) -> dict[str, object]:
    def maybe(v: object) -> object:
        return None if rng.random() < 0.3 else v

    n = rng.choice([0, 1, 2, 31, 32, 33, 62, 63, 64, 200])
    text = "".join(rng.choice(_CHARS) for _ in range(n))
    if rng.random() < 0.3:
        text = "".join(rng.choice("abcXYZ 019~") for _ in range(n))
    return {
        "l": rng.choice([-(2**63), 2**63 - 1, 0, -1, rng.randint(-(2**63), 2**63 - 1)]),
        "i": rng.choice([-(2**31), 2**31 - 1, 0, -1, rng.randint(-(2**31), 2**31 - 1)]),
        "s": rng.choice([-(2**15), 2**15 - 1, 0]),
        "b": rng.choice([-128, 127, 0]),
        "z": rng.random() < 0.5,
        "d": rng.choice([0.0, -0.0, 1.5, -1e308, 5e-324]),
        "f": maybe(rng.choice([0.0, 1.5, -2.25, 3.4028234663852886e38])),
        "boxed": maybe(rng.choice([-(2**63), 2**63 - 1, 7])),
        "text": maybe(text),
        "Upper": maybe(rng.randint(-(2**31), 2**31 - 1)),
        "c": rng.choice(["\x00", "a", "\u00e9", "\u6f22", "\uffff"]),
        "boxed_char": maybe(rng.choice([c for c in _CHARS if ord(c) <= 0xFFFF])),
    }


@pytest.mark.parametrize("kryo", [5, 2])
def test_decode_of_encode_is_the_value_and_the_bytes_are_the_models(kryo: int) -> None:
    rng = random.Random(23)
    writer = KryoWriter(RANDOM, "a.B", uvarint(85 + 2, 5), "random", kryo)
    for _ in range(500):
        value = _random_value(rng)
        data = writer.to_bytes(value)
        assert writer.from_bytes(data) == value
        assert data == encode(RANDOM, value, kryo=kryo)  # the tests' second implementation of Kryo's rules
    assert writer.to_bytes(None) == b"\x00" == encode(RANDOM, None)


def test_a_nul_char_is_one_byte_as_kryo_writes_it() -> None:
    writer = KryoWriter(pa.struct([pa.field("t", pa.string())]), "a.B", b"\x03", "nul", 5)
    for text in ["\x00", "\x00a", "\x00é", "x" * 40 + "\x00"]:
        data = writer.to_bytes({"t": text})
        assert writer.from_bytes(data) == {"t": text}
        assert b"\xc0\x80" not in data and data.count(0) == text.count("\x00")


@pytest.mark.parametrize(
    "bad",
    [
        {"l": 2**63},
        {"i": 2**31},
        {"s": 2**15},
        {"b": 128},
        {"z": 1},
        {"f": 1e39},
        {"l": None},
        {"text": b"x"},
        {"c": "ab"},
        {"c": "\U0001f600"},
        {"c": "\ud800"},
        {"c": None},
        {"boxed_char": 65},
    ],
)
def test_values_that_do_not_fit_are_refused(bad: dict[str, object]) -> None:
    from flinkstate.state.errors import SerializationError

    writer = KryoWriter(RANDOM, "a.B", b"\x57", "random", 5)
    value = {**_random_value(random.Random(1)), **bad}
    with pytest.raises(SerializationError):
        writer.to_bytes(value)
    with pytest.raises(SerializationError, match="lacks field"):
        writer.to_bytes({"l": 1})


def test_a_class_header_no_value_carries_is_refused() -> None:
    with pytest.raises(UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\] v: .*a.B.*no value"):
        state_class_header([b"\x00"], "VALUE", False, "a.B", "v")
    two = [encode(RANDOM, _random_value(random.Random(2)), c) for c in (85, 86)]
    with pytest.raises(UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\] v: .*2 classes"):
        state_class_header(two, "VALUE", False, "a.B", "v")


def _by_key(sp: FlinkSavepoint, op: str, state: str) -> dict[Any, Any]:
    return {r["key"]: r["value"] for r in sp.keyed_state(op, state).to_pylist()}


@pytest.mark.parametrize("fixture", ["heap_canonical", "rocksdb_native"])
def test_an_edit_sets_a_declared_kryo_state_from_rows(fixture: str, tmp_path: Path) -> None:
    """v_kryo replaced from rows reads back (declared) as the rows; its meta info is the one read;
    every other state is as it was."""
    source = read_savepoint(str(FIXTURES / fixture), types={"v_kryo": OPAQUE})
    rows = [{"key": k, "value": {"value": v}} for k, v in [(1, 5), (2, -(2**63)), (7, 2**63 - 1), (1000, 0)]]
    edits = SavepointEdits().set_keyed_state("keyed-states", "v_kryo", rows)
    edit_savepoint(source, str(tmp_path / "sp"), edits)
    back = read_savepoint(str(tmp_path / "sp"), types={"v_kryo": OPAQUE}, flink_version="2.3")
    assert _by_key(back, "keyed-states", "v_kryo") == {r["key"]: r["value"] for r in rows}
    old = next(
        i
        for i in source.keyed_header(source.operator("keyed-states").operator_id).states
        if i.name == "v_kryo"
    )
    new = next(
        i for i in back.keyed_header(back.operator("keyed-states").operator_id).states if i.name == "v_kryo"
    )
    assert new.meta == old.meta
    for name in ("v_long", "v_string", "v_pojo", "ttl_value"):
        assert _by_key(back, "keyed-states", name) == _by_key(source, "keyed-states", name)


def test_an_edit_sets_a_rich_kryo_state_with_nulls_and_unicode(tmp_path: Path) -> None:
    source = read_savepoint(str(FIXTURES / "sql_rocksdb"), types={"k_rich": RICH_DDL})
    names = [None, "", "é", "中文\U0001f600", "x" * 70, "ascii"]
    values = {
        k: {
            "id": -k,
            "count": 2**31 - 1,
            "name": names[k % 6],
            "boxed": None if k % 2 else k,
            "ratio": None if k % 3 else -0.0,
            "flag": k % 2 == 0,
        }
        for k in range(12)
    }
    rows = [{"key": k, "value": v} for k, v in values.items()]
    edit_savepoint(
        source, str(tmp_path / "sp"), SavepointEdits().set_keyed_state("kryo-states", "k_rich", rows)
    )
    back = read_savepoint(str(tmp_path / "sp"), types={"k_rich": RICH_DDL}, flink_version="2.3")
    assert _by_key(back, "kryo-states", "k_rich") == values
    assert _by_key(back, "kryo-states", "k_after") == _by_key(source, "kryo-states", "k_after")


def test_without_its_declaration_a_kryo_state_is_not_set(tmp_path: Path) -> None:
    source = read_savepoint(str(FIXTURES / "heap_canonical"))
    edits = SavepointEdits().set_keyed_state("keyed-states", "v_kryo", [{"key": 1, "value": b"\x01"}])
    with pytest.raises(UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\].*'v_kryo'.*not set"):
        edit_savepoint(source, str(tmp_path / "sp"), edits)
    assert not list(tmp_path.iterdir())


def test_rows_that_do_not_fit_the_declared_struct_are_refused(tmp_path: Path) -> None:
    source = read_savepoint(str(FIXTURES / "heap_canonical"), types={"v_kryo": OPAQUE})
    for bad in [{"value": "x"}, {"value": None}]:
        edits = SavepointEdits().set_keyed_state("keyed-states", "v_kryo", [{"key": 1, "value": bad}])
        with pytest.raises(FlinkStateError, match=r"\[(TYPE_MISMATCH|NULL_ELEMENT|SERIALIZATION)\].*v_kryo"):
            edit_savepoint(source, str(tmp_path / "sp"), edits)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("kind", "ttl"), [("VALUE", False), ("VALUE", True), ("LIST", True), ("MAP", False), ("MAP", True)]
)
@pytest.mark.parametrize(
    "header", [uvarint(87, 5), b"\x01\x00" + bytes(b"a.B"[:-1]) + bytes([ord("B") | 0x80])]
)
def test_the_class_header_is_found_in_every_entry_layout(kind: str, ttl: bool, header: bytes) -> None:
    """A value's class header (a registration id, or an unregistered class's name) after a map
    value's null flag and a TTL timestamp; null objects and null map values carry none."""
    writer = KryoWriter(RANDOM, "a.B", header, "v", 5)
    value = writer.to_bytes(_random_value(random.Random(3)))
    stamp = b"\x00" * 7 + b"\x05" if ttl else b""
    entries = {
        "VALUE": [stamp + b"\x00", stamp + value],
        "LIST": [stamp + value + b"," + stamp + value],
        "MAP": [b"\x01", b"\x00" + stamp + b"\x00", b"\x00" + stamp + value],
    }[kind]
    assert state_class_header(entries, kind, ttl, "a.B", "v") == header
