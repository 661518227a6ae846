"""Tuple, Row and POJO keys and POJO values in written Flink savepoints: hash codes and bytes
compared with what Flink 2.3 computes and writes, everything read back by our reader in the key
group Flink gives it, and what cannot be written refused before any file is."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from flink_model import FIXTURES
from types_model import TYPED_WRITES, types_model
from write_model import _type, build_checkpoint, canonical, rows, split_type

from flinkstate.checkpoint import CompletedCheckpoint
from flinkstate.checkpoint.flink import (
    FlinkSavepoint,
    FlinkTarget,
    UnsupportedFlinkWriteError,
    operator_id_hex,
    read_savepoint,
    write_savepoint,
)
from flinkstate.checkpoint.flink.errors import DeclaredTypeError
from flinkstate.checkpoint.flink.types.declared_read import parse_type
from flinkstate.checkpoint.flink.types.key_hash import java_hash_code
from flinkstate.checkpoint.flink.types.snapshots_write import key_snapshot, snapshot_of
from flinkstate.checkpoint.flink.wire.data_write import Output
from flinkstate.state import Types
from flinkstate.state.errors import FlinkStateError, InvalidArgumentError, SerializationError
from flinkstate.state.keygroups.hashing import murmur_hash
from flinkstate.state.serializers.lookup import serializer_for
from flinkstate.state.types.mapping import type_from_json

_LINE = Types.POJO(
    "Hashes$Line", ["qty", "item", "price"], [Types.INT(), Types.STRING(), Types.DOUBLE()], ["item", "qty"]
)
_OPAQUE = "STRUCT<value: BIGINT NOT NULL>"  # FixtureJob's Kryo class, declared

#: (type, key, its hashCode() as Flink 2.3's classes compute it: printed by a Java program
#: building each key as a Tuple1..3, Row or POJO whose hashCode() is Objects.hash(item, qty)).
JAVA_HASHES = [
    (Types.TUPLE([Types.LONG(), Types.STRING()]), (5, "x"), 275),
    (Types.TUPLE([Types.INT(), Types.DOUBLE(), Types.BOOLEAN()]), (-7, -0.0, True), 2147478152),
    (Types.TUPLE([Types.STRING()]), ("\U0001f600\u00e9",), 54960102),
    (Types.TUPLE([Types.DOUBLE(), Types.FLOAT()]), (math.nan, 1.5), -1094189056),
    (Types.ROW([Types.LONG(), Types.STRING()]), (5, "x"), 2228),
    (Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()]), (5, None), 2077),
    (
        Types.TUPLE([Types.ROW([Types.INT(), Types.STRING()]), Types.LONG()]),
        ((1, "a"), -(2**63)),
        -2147419137,
    ),
    (
        Types.ROW([Types.TUPLE([Types.SHORT(), Types.BYTE()]), Types.ROW([Types.BOOLEAN()])]),
        ((3, -4), (None,)),
        4743,
    ),
    (_LINE, ("pen", 2.5, -3), 3438021),
    (_LINE, (None, None, 0), 961),
    (Types.TUPLE([Types.TUPLE([Types.LONG()]), Types.STRING()]), ((9,), "\t"), 288),
]


@pytest.mark.parametrize(("t", "key", "expected"), JAVA_HASHES)
def test_hash_codes_equal_javas(t: Any, key: Any, expected: int) -> None:
    assert java_hash_code(key, t) == expected


_SNAP = "org.apache.flink.api.common.typeutils.base.{0}Serializer${0}SerializerSnapshot"
_POINT = Types.POJO("Probe$Point", ["id", "name", "score"], [Types.LONG(), Types.STRING(), Types.DOUBLE()])


def _utf(text: str) -> str:
    return len(text).to_bytes(2, "big").hex() + text.encode().hex()


def _atomic(name: str) -> str:
    return _utf(_SNAP.format(name)) + "00000003"


def _composite(snapshot: str, outer: str, nested: list[str]) -> str:
    head = _utf(snapshot) + "00000003" + "000de704" + outer
    return head + "001457fd" + "00000001" + f"{len(nested):08x}" + "".join(nested)


def _pojo_field(name: str, snapshot: str) -> str:
    declared = _utf("Probe$Point") + _utf(name)
    framed = [f"01{len(bytes.fromhex(p)):08x}{p}" for p in (declared, snapshot)]
    return _utf(name) + "".join(framed)


_OPTIONAL_MAP = "000004f2c69a3d70"
_RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
#: (type, value, the serializer snapshot and the value's bytes Flink 2.3 writes: its
#: TupleSerializer, RowSerializer and PojoSerializer, written by a Java program).
FLINK_BYTES = [
    (
        Types.TUPLE([Types.LONG(), Types.STRING()]),
        (5, "x"),
        _composite(
            f"{_RUNTIME}TupleSerializerSnapshot",
            "00000002" + _utf("org.apache.flink.api.java.tuple.Tuple2"),
            [_atomic("Long"), _atomic("String")],
        ),
        "00000000000000050278",
    ),
    (  # a Row's snapshot is the same with and without field names
        Types.ROW([Types.LONG(), Types.STRING()]),
        (5, "x"),
        _composite(
            f"{_RUNTIME}RowSerializer$RowSerializerSnapshot",
            "0000000401",
            [_atomic("Long"), _atomic("String")],
        ),
        "0000000000000000050278",
    ),
    (
        Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()]),
        (5, None),
        _composite(
            f"{_RUNTIME}RowSerializer$RowSerializerSnapshot",
            "0000000401",
            [_atomic("Long"), _atomic("String")],
        ),
        "100000000000000005",
    ),
    (
        _POINT,
        (7, "n", None),
        _utf(f"{_RUNTIME}PojoSerializerSnapshot")
        + "00000002"
        + _utf("Probe$Point")
        + _OPTIONAL_MAP
        + "00000003"
        + _pojo_field("id", _atomic("Long"))
        + _pojo_field("name", _atomic("String"))
        + _pojo_field("score", _atomic("Double"))
        + (_OPTIONAL_MAP + "00000000") * 2,
        "0200000000000000000700026e01",
    ),
]


@pytest.mark.parametrize(("t", "value", "snapshot", "data"), FLINK_BYTES)
def test_snapshots_and_values_equal_flinks(t: Any, value: Any, snapshot: str, data: str) -> None:
    for written in (snapshot_of(t, "value"), key_snapshot(t, "key")):
        out = Output("test")
        written.write_top_level(out, FlinkTarget())
        assert bytes(out.buf).hex() == "00000002" + snapshot
    assert serializer_for(t).to_bytes(value).hex() == data
    assert serializer_for(t).from_bytes(bytes.fromhex(data)) == value


def test_pojo_type() -> None:
    assert _LINE.field_names == ("item", "price", "qty")  # Flink's order, by name
    assert type_from_json(_LINE.to_json()) == _LINE
    assert str(_LINE) == "POJO Hashes$Line<item STRING, price DOUBLE, qty INT>"
    row = Types.ROW_NAMED(list(_LINE.field_names), list(_LINE.field_types))
    assert row != _LINE
    with pytest.raises(InvalidArgumentError, match=r"\[UNSUPPORTED_TYPE\].*not among its fields"):
        Types.POJO("a.B", ["x"], [Types.LONG()], ["y"])
    with pytest.raises(InvalidArgumentError, match=r"\[UNSUPPORTED_TYPE\].*Java class name"):
        Types.POJO(" ", ["x"], [Types.LONG()])
    # Java orders by UTF-16 code units: U+FB01 after U+1F600 (a surrogate pair starting 0xD83D)
    assert Types.POJO("a.B", ["\ufb01", "\U0001f600"], [Types.INT(), Types.LONG()]).field_names == (
        "\U0001f600",
        "\ufb01",
    )


@pytest.fixture(scope="module")
def typed_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build_checkpoint(str(tmp_path_factory.mktemp("typed") / "checkpoint"), types_model())


def _read_rows(sp: FlinkSavepoint, uids: list[str] | None = None) -> set[tuple[Any, ...]]:
    """Every keyed row of ``sp`` (of operators ``uids``) in the model's terms, each key in the
    group Flink gives it."""
    out = set()
    for uid, op in types_model().items():
        if uids is not None and uid not in uids:
            continue
        max_p = sp.operator(uid).max_parallelism
        for name, s in op.states.items():
            for r in sp.keyed_state(uid, name).to_pylist():
                key = r["key"]
                plain = tuple(key.values()) if isinstance(key, dict) else key
                flink = murmur_hash(java_hash_code(_plain(plain, op.key_type), _type(op.key_type))) % max_p
                assert r["key_group"] == flink, (uid, name, key)
                extra = r.get("position", r.get("user_key"))
                extra = canonical(extra, s.user_key_type) if "user_key" in r else extra
                value = None if r["value"] is None else canonical(r["value"], s.value_type)
                ts = r.get("ttl_timestamp")
                stamp = None if ts is None else int(ts.timestamp() * 1000) if hasattr(ts, "timestamp") else ts
                out.add((uid, name, canonical(key, op.key_type), extra, value, stamp))
    return out


def _plain(value: Any, type_name: str) -> Any:
    """A key as our reader gives it (structs as dicts) as the tuples the model holds."""
    _, args = split_type(type_name)
    if isinstance(value, dict):
        value = tuple(value.values())
    if isinstance(value, tuple) and args:
        return tuple(_plain(v, t) for v, t in zip(value, args, strict=True))
    return value


@pytest.mark.parametrize("name", sorted(TYPED_WRITES))
def test_round_trip_typed_keys_and_values(
    typed_checkpoint: CompletedCheckpoint, tmp_path: Path, name: str
) -> None:
    sp = write_savepoint(typed_checkpoint, str(tmp_path / "sp"), **TYPED_WRITES[name])
    assert _read_rows(sp) == set(rows(models=types_model()))
    # written back from the savepoint read: the same keys in the same groups, POJOs kept
    again = write_savepoint(sp, str(tmp_path / "again"))
    assert _read_rows(again) == set(rows(models=types_model()))
    info = {s.name: s for s in again.keyed_header(again.operator("key-tuple").operator_id).states}
    assert info["v_line"].value.type_info == replace(_type("LINE"), hash_fields=None)  # not in snapshots


def test_pojo_keys_of_a_flink_savepoint_are_not_placed_again(
    typed_checkpoint: CompletedCheckpoint, tmp_path: Path
) -> None:
    """A Flink savepoint does not say what a POJO key's hashCode() covers: its keys keep their
    groups, and a new max parallelism (which would move them) is refused, before any file."""
    sp = write_savepoint(typed_checkpoint, str(tmp_path / "sp"), operators=["key-pojo", "key-tuple"])
    ref = operator_id_hex("key-pojo")
    with pytest.raises(UnsupportedFlinkWriteError, match=rf"'{ref}': the key .*RestoreJob\$Point hashes as"):
        write_savepoint(sp, str(tmp_path / "bad"), max_parallelism=256)
    assert not (tmp_path / "bad").exists()
    ok = write_savepoint(sp, str(tmp_path / "ok"), operators=["key-tuple"], max_parallelism=256)
    assert ok.operator(operator_id_hex("key-tuple")).max_parallelism == 256
    assert _read_rows(ok, ["key-tuple"]) == {r for r in rows(models=types_model()) if r[0] == "key-tuple"}


@pytest.mark.parametrize(
    ("fixture", "operator", "message", "types", "layout"),
    [
        # declared for reading, Kryo is still not written, and a heap checkpoint cannot carry it
        (
            "heap_checkpoint",
            "keyed-states",
            r"state 'v_kryo': the Kryo-serialized.*heap checkpoint",
            {"v_kryo": _OPAQUE},
            {},
        ),
        # carried as bytes (test_flink_passthrough), but RowData keys cannot move to new key groups
        (
            "sql_heap",
            "4_deduplicate",
            r"'4_deduplicate': the key: SQL RowData cannot be written.*keep max parallelism 128",
            None,
            {"max_parallelism": 256},
        ),
    ],
)
def test_unsupported_serializers_refused_naming_the_state(
    tmp_path: Path,
    fixture: str,
    operator: str,
    message: str,
    types: dict[str, str] | None,
    layout: dict[str, int],
) -> None:
    sp = read_savepoint(str(FIXTURES / fixture), types=types)
    with pytest.raises(UnsupportedFlinkWriteError, match=rf"\[FLINK_UNSUPPORTED\].*{message}"):
        write_savepoint(sp, str(tmp_path / "sp"), operators=[operator], **layout)  # type: ignore[arg-type]
    assert not (tmp_path / "sp").exists()


#: Avro's snapshot class, made as long as StringSerializer's (the stream keeps its size)
_AVRO = "org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot$".ljust(84, "x")


def test_a_serializer_we_cannot_read_is_refused_naming_the_state(
    typed_checkpoint: CompletedCheckpoint, tmp_path: Path
) -> None:
    """A Flink savepoint with a state whose serializer we cannot read (here: a state's snapshot
    class changed to an Avro one) is refused for writing, naming the operator and state."""
    sp_dir = tmp_path / "sp"
    write_savepoint(typed_checkpoint, str(sp_dir), operators=["key-row"], inline_threshold=0)
    string = _SNAP.format("String").encode()
    for path in sp_dir.glob("keyed-*"):
        data = path.read_bytes()
        at = data.rindex(string)  # the value serializer's (the key's is a Row of one String too)
        path.write_bytes(data[:at] + _AVRO.encode() + data[at + len(string) :])
    sp = read_savepoint(str(sp_dir))
    message = rf"\[FLINK_UNSUPPORTED\] operator '{operator_id_hex('key-row')}'.*state v value.*Avro"
    with pytest.raises(UnsupportedFlinkWriteError, match=message):
        write_savepoint(sp, str(tmp_path / "again"))
    assert not (tmp_path / "again").exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TUPLE<BIGINT, STRING>", Types.TUPLE([Types.LONG(), Types.STRING()])),
        (
            "POJO com.example.Point$Inner<name: STRING, id BIGINT NOT NULL> HASH(name, id)",
            Types.POJO(
                "com.example.Point$Inner", ["name", "id"], [Types.STRING(), Types.LONG()], ["name", "id"]
            ),
        ),
        ("ARRAY<TUPLE<INT, DOUBLE>>", Types.LIST(Types.TUPLE([Types.INT(), Types.DOUBLE()]))),
        ("MAP<STRING, POJO a.B<x: INT>>", Types.MAP(Types.STRING(), Types.POJO("a.B", ["x"], [Types.INT()]))),
        (
            "STRUCT<a: TUPLE<SMALLINT>, b: STRING>",
            Types.ROW_NAMED(["a", "b"], [Types.TUPLE([Types.SHORT()]), Types.STRING()]),
        ),
        ("STRUCT<id: BIGINT NOT NULL>", pa.struct([pa.field("id", pa.int64(), False)])),  # Arrow as before
    ],
)
def test_declared_flink_types(text: str, expected: Any) -> None:
    assert parse_type(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("POJO a.B<x: INT> HASH(y)", "not among its fields"),
        ("POJO a.B<x: INT> HASH(x", "ends early"),
        ("TUPLE<>", "unknown type >"),
    ],
)
def test_bad_declared_flink_types(text: str, message: str) -> None:
    with pytest.raises(DeclaredTypeError, match=rf"\[INVALID_OPTION\].*{message}"):
        parse_type(text)


def test_pojo_serializer_nulls_and_refusals() -> None:
    ser = serializer_for(_POINT)
    assert ser.to_bytes(None) == b"\x01"  # a null POJO: Flink's IS_NULL flag alone
    assert ser.from_bytes(b"\x01") is None
    assert ser.from_bytes(ser.to_bytes((0, None, None))) == (0, None, None)
    with pytest.raises(SerializationError, match="subclass flags 4"):
        ser.from_bytes(b"\x04")
    with pytest.raises(SerializationError, match="expected 3 fields, got 2"):
        ser.to_bytes((1, "a"))
    with pytest.raises(SerializationError, match="expected a list or tuple"):
        ser.to_bytes({"id": 1})


@pytest.mark.parametrize(
    ("key", "message"),
    [((1,), "has 2 fields"), ((None, "a"), "Tuple key field is None"), ("ab", "expected a list or tuple")],
)
def test_a_key_that_does_not_fit_is_a_typed_error(key: Any, message: str) -> None:
    with pytest.raises(FlinkStateError, match=message):
        java_hash_code(key, Types.TUPLE([Types.LONG(), Types.STRING()]))
