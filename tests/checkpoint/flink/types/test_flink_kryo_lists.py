"""Kryo collection fields (``ARRAY<STRING>``, ``ARRAY<BIGINT>``, ...: a ``java.util.ArrayList``)
against the bytes Flink 1.20 (Kryo 2) and 2.3 (Kryo 5) wrote for ``MigrateJob$Listed`` and
against a second implementation (:mod:`kryo_model`)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest
from kryo_model import encode_with_lists
from migrate_model import COUNTED, KEYS, LISTED, counted, listed

from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.checkpoint.flink.errors import DeclaredTypeError
from flinkstate.checkpoint.flink.types.declared_read import parse_type
from flinkstate.checkpoint.flink.types.kryo_read import KryoReader
from flinkstate.checkpoint.flink.types.kryo_write import KryoWriter, class_header

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "flink"
#: The savepoints of MigrateJob by Kryo major: Flink 1.20's (heap and RocksDB) and 2.3's.
SAVEPOINTS = {2: ["1.20/migrate_heap", "1.20/migrate_rocksdb"], 5: ["migrate_heap"]}
#: Its Kryo states: (class, declaration, model).
STATES = {
    "kryo_listed": ("MigrateJob$Listed", LISTED, listed),
    "kryo_counted": ("MigrateJob$Counted", COUNTED, counted),
}
DECLARED = parse_type(LISTED)
assert isinstance(DECLARED, pa.StructType)


def _raw(path: str, state: str = "kryo_listed") -> dict[int, bytes]:
    """The value bytes of a state by key."""
    sp = read_savepoint(str(FIXTURES / path))
    out = {}
    for rows in sp.raw_keyed("migrate", state):
        for key, value in zip(rows.key, rows.value, strict=True):
            out[int.from_bytes(key[:8], "big", signed=True)] = value  # then the void namespace
    return out


@pytest.mark.parametrize("state", sorted(STATES))
@pytest.mark.parametrize("kryo, path", [(k, p) for k, paths in SAVEPOINTS.items() for p in paths])
def test_the_bytes_flink_wrote_decode_to_the_job_s_values_and_encode_back(
    kryo: int, path: str, state: str
) -> None:
    java_class, ddl, model = STATES[state]
    declared = parse_type(ddl)
    assert isinstance(declared, pa.StructType)
    raw = _raw(path, state)
    assert sorted(raw) == list(KEYS)
    reader = KryoReader(declared, java_class, state, kryo)
    for k, data in raw.items():
        assert reader.from_bytes(data) == model(k)
        header = class_header(data, 0)
        assert header is not None
        writer = KryoWriter(declared, java_class, header, state, kryo)
        assert writer.to_bytes(model(k)) == data
        assert encode_with_lists(declared, model(k), header[0] - 2, kryo) == data


def test_the_two_majors_differ_in_sizes_and_fixed_width_fields() -> None:
    old, new = _raw("1.20/migrate_heap"), _raw("migrate_heap")
    assert all(old[k] != new[k] for k in KEYS)
    # the wrong numbers Kryo 5 reads from Kryo 2 bytes are never returned: the bytes do not fit
    reader = KryoReader(DECLARED, "MigrateJob$Listed", "kryo_listed", 5)
    for k in (0, 3, 7):
        with pytest.raises(DeclaredTypeError):
            reader.from_bytes(old[k])


_TEXT = ["a", "Z", "0", "\u00e9", "\u6f22", "\U0001f600", "\t", ""]


def _random_element(rng: random.Random, t: pa.DataType) -> object:
    if pa.types.is_string(t):
        return "".join(rng.choices(_TEXT, k=rng.randint(0, 40)))
    if pa.types.is_float64(t):
        return rng.choice([0.5, -0.0, 1e300, -2.75, float(rng.randint(-(2**53), 2**53))])
    bits = 64 if pa.types.is_int64(t) else 32
    return rng.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _random_value(rng: random.Random, struct_type: pa.StructType) -> dict[str, object]:
    out: dict[str, object] = {}
    for f in struct_type:
        if pa.types.is_list(f.type):
            n = rng.choice([0, 1, 2, 62, 63, 64, 200]) if rng.random() > 0.2 else None
            nulls = rng.random() < 0.5
            out[f.name] = (
                None
                if n is None
                else [
                    None if nulls and rng.random() < 0.1 else _random_element(rng, f.type.value_type)
                    for _ in range(n)
                ]
            )
        elif pa.types.is_string(f.type):
            out[f.name] = None if rng.random() < 0.2 else _random_element(rng, f.type)
        else:
            out[f.name] = rng.randint(-(2**62), 2**62)
    return out


@pytest.mark.parametrize("kryo", [2, 5])
def test_random_values_with_several_list_fields_match_the_model(kryo: int) -> None:
    t = parse_type(
        "STRUCT<b: ARRAY<STRING>, a: BIGINT NOT NULL, name: STRING, c: ARRAY<STRING>, "
        "longs: ARRAY<BIGINT>, ints: ARRAY<INT>, doubles: ARRAY<DOUBLE>>"
    )
    assert isinstance(t, pa.StructType)
    rng = random.Random(36 + kryo)
    header = b"\x0b"  # registration id 9
    writer = KryoWriter(t, "C", header, "s", kryo)
    reader = KryoReader(t, "C", "s", kryo)
    for _ in range(300):
        value = _random_value(rng, t)
        data = writer.to_bytes(value)
        assert data == encode_with_lists(t, value, 9, kryo)
        assert reader.from_bytes(data) == value


def test_a_list_of_other_elements_is_refused_by_name() -> None:
    t = parse_type("STRUCT<ids: ARRAY<SMALLINT>>")
    with pytest.raises(
        DeclaredTypeError, match=r"\[INVALID_OPTION\].*ids.*ARRAY<STRING\|BIGINT\|INT\|DOUBLE>"
    ):
        KryoReader(t, "C", "s", 2)


@pytest.mark.parametrize(
    "data, why",
    [
        (b"\x0b\x01\x01\x00java.util.LinkedLis\xf4\x01\x00", "java.util.LinkedList"),
        (b"\x0b\x01\x0c\x01\x00", "registered"),
        (b"\x0b\x01\x01\x00java.util.ArrayLis\xf4\x02\x00", "back reference"),
        (b"\x0b\x01\x01\x00java.util.ArrayLis\xf4\x01\x02\x05\x00", "element marker 5"),
    ],
)
def test_collection_bytes_the_reader_does_not_know_are_refused(data: bytes, why: str) -> None:
    t = parse_type("STRUCT<tags: ARRAY<STRING>>")
    with pytest.raises(DeclaredTypeError, match=why):
        KryoReader(t, "C", "s", 2).from_bytes(data)
