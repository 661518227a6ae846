"""Type information: PyFlink's ``Types`` factories, JSON round trip, inference."""

from __future__ import annotations

import collections
import datetime
import decimal
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from flinkstate.state import (
    FlinkStateError,
    InvalidArgumentError,
    StateTypeError,
    TypeInformation,
    Types,
)
from flinkstate.state.types.mapping import (
    ArrowTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    RowTypeInfo,
    infer_type,
    to_type_info,
    type_from_json,
)

ATOMIC: dict[str, tuple[pa.DataType, type]] = {
    "STRING": (pa.string(), str),
    "CHAR": (pa.string(), str),
    "BOOLEAN": (pa.bool_(), bool),
    "BYTE": (pa.int8(), int),
    "SHORT": (pa.int16(), int),
    "INT": (pa.int32(), int),
    "LONG": (pa.int64(), int),
    "FLOAT": (pa.float32(), float),
    "DOUBLE": (pa.float64(), float),
    "BIG_DEC": (pa.decimal128(38, 18), decimal.Decimal),
    "SQL_DATE": (pa.date32(), datetime.date),
    "SQL_TIME": (pa.time32("ms"), datetime.time),
    "SQL_TIMESTAMP": (pa.timestamp("us"), datetime.datetime),
    "INSTANT": (pa.timestamp("us", tz="UTC"), datetime.datetime),
}
UNMAPPED_ARROW = [
    pa.float16(),
    pa.uint8(),
    pa.uint64(),
    pa.null(),
    pa.date64(),
    pa.time64("us"),
    pa.timestamp("ms"),
    pa.timestamp("us", tz="Europe/Paris"),
    pa.decimal128(10, 2),
    pa.duration("s"),
    pa.binary(4),
    pa.list_(pa.int32(), 3),
    pa.dictionary(pa.int32(), pa.string()),
]

PRIMITIVES = ["BOOLEAN", "BYTE", "SHORT", "INT", "LONG", "FLOAT", "DOUBLE", "CHAR"]


def atomic(name: str) -> TypeInformation:
    factory: Callable[[], TypeInformation] = getattr(Types, name)
    return factory()


def assert_code(exc: BaseException, code: str) -> None:
    assert isinstance(exc, FlinkStateError)
    assert exc.code == code
    assert str(exc).startswith(f"[{code}] ")


# -- factories -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ATOMIC))
def test_atomic_factories(name: str) -> None:
    t = atomic(name)
    assert t == BasicTypeInfo(name) == atomic(name)
    assert hash(t) == hash(atomic(name))
    assert (t.to_arrow(), t.python_type) == ATOMIC[name]
    assert not t.is_pickled
    assert str(t) == name


def test_composite_factories() -> None:
    assert Types.PRIMITIVE_ARRAY(Types.BYTE()) == ListTypeInfo(Types.BYTE(), "PRIMITIVE_ARRAY")
    assert Types.PRIMITIVE_ARRAY(Types.BYTE()).python_type is bytes
    assert Types.PRIMITIVE_ARRAY(Types.INT()).python_type is list
    assert Types.LIST(Types.LONG()) == ListTypeInfo(Types.LONG(), "LIST")
    assert Types.BASIC_ARRAY(Types.STRING()) == ListTypeInfo(Types.STRING(), "BASIC_ARRAY")
    obj = Types.OBJECT_ARRAY(Types.LIST(Types.LONG()))
    assert obj == ListTypeInfo(Types.LIST(Types.LONG()), "OBJECT_ARRAY")
    assert Types.MAP(Types.STRING(), Types.LONG()) == MapTypeInfo(Types.STRING(), Types.LONG())
    assert Types.MAP(Types.STRING(), Types.LONG()).python_type is dict
    row = Types.ROW([Types.LONG(), Types.STRING()])
    assert isinstance(row, RowTypeInfo)
    assert (row.kind, row.field_names) == ("ROW", ("f0", "f1"))
    assert row.python_type is tuple
    named = Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()])
    assert isinstance(named, RowTypeInfo)
    assert named.field_names == ("id", "name")
    assert named.field_types == (Types.LONG(), Types.STRING())
    assert named != row
    tup = Types.TUPLE([Types.INT(), Types.INT()])
    assert isinstance(tup, RowTypeInfo)
    assert (tup.kind, tup.field_names) == ("TUPLE", ("f0", "f1"))
    assert tup != Types.ROW([Types.INT(), Types.INT()])
    assert Types.PICKLED_BYTE_ARRAY() == PickledBytesTypeInfo()
    assert Types.PICKLED_BYTE_ARRAY().python_type is object


def test_is_pickled_propagates_through_nesting() -> None:
    pickled = Types.PICKLED_BYTE_ARRAY()
    assert pickled.is_pickled
    assert Types.LIST(pickled).is_pickled
    assert Types.MAP(Types.STRING(), Types.LIST(pickled)).is_pickled
    assert Types.MAP(pickled, Types.LONG()).is_pickled
    assert Types.ROW([Types.LONG(), Types.ROW([pickled])]).is_pickled
    assert not Types.ROW([Types.LONG(), Types.LIST(Types.STRING())]).is_pickled


@pytest.mark.parametrize("name", sorted(ATOMIC))
def test_array_element_rules(name: str) -> None:
    """PRIMITIVE_ARRAY takes Java primitives; BASIC_ARRAY those and STRING (as Flink)."""
    for kind, allowed in [("PRIMITIVE_ARRAY", PRIMITIVES), ("BASIC_ARRAY", [*PRIMITIVES, "STRING"])]:
        factory = getattr(Types, kind)
        if name in allowed:
            assert factory(atomic(name)) == ListTypeInfo(atomic(name), kind)
        else:
            with pytest.raises(InvalidArgumentError) as info:
                factory(atomic(name))
            assert_code(info.value, "UNSUPPORTED_TYPE")


@pytest.mark.parametrize(
    "element", [Types.LIST(Types.INT()), Types.PICKLED_BYTE_ARRAY(), ArrowTypeInfo(pa.uint8())]
)
def test_arrays_of_non_basic_elements_are_object_arrays_only(element: TypeInformation) -> None:
    assert Types.OBJECT_ARRAY(element) == ListTypeInfo(element, "OBJECT_ARRAY")
    for factory in (Types.PRIMITIVE_ARRAY, Types.BASIC_ARRAY):
        with pytest.raises(InvalidArgumentError) as info:
            factory(element)
        assert_code(info.value, "UNSUPPORTED_TYPE")


@pytest.mark.parametrize(
    "build",
    [
        lambda: Types.LIST(None),
        lambda: Types.LIST("LONG"),
        lambda: Types.MAP(Types.STRING(), int),
        lambda: Types.ROW([Types.LONG(), "x"]),
        lambda: Types.ROW_NAMED(["a"], [object()]),
        lambda: Types.TUPLE([None]),
        lambda: Types.PRIMITIVE_ARRAY(bytes),
        lambda: ListTypeInfo("LONG"),  # type: ignore[arg-type]
        lambda: MapTypeInfo(Types.LONG(), None),  # type: ignore[arg-type]
        lambda: RowTypeInfo((1,), ("a",)),  # type: ignore[arg-type]
        lambda: ArrowTypeInfo("int64"),
    ],
)
def test_non_types_are_typed_errors(build: Callable[[], Any]) -> None:
    with pytest.raises(StateTypeError) as info:
        build()
    assert info.value.code in ("TYPE_MISMATCH", "UNSUPPORTED_TYPE")
    assert_code(info.value, info.value.code)


@pytest.mark.parametrize(
    "build",
    [
        lambda: BasicTypeInfo("VARCHAR"),
        lambda: ListTypeInfo(Types.LONG(), "VECTOR"),
        lambda: RowTypeInfo((Types.LONG(),), ("a",), "STRUCT"),
        lambda: Types.ROW_NAMED(["a", "b"], [Types.LONG()]),
        lambda: Types.ROW_NAMED(["a"], [Types.LONG(), Types.LONG()]),
        lambda: Types.ROW_NAMED(["a", "a"], [Types.LONG(), Types.INT()]),
        lambda: Types.ROW_NAMED([1], [Types.LONG()]),  # type: ignore[list-item]
        lambda: Types.ROW_NAMED([""], [Types.LONG()]),
        lambda: to_type_info(pa.struct([("a", pa.int64()), ("a", pa.int32())])),
    ],
)
def test_invalid_constructions_are_typed_errors(build: Callable[[], Any]) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        build()
    assert_code(info.value, "UNSUPPORTED_TYPE")


def test_row_field_lists_are_stored_as_tuples_and_hashable() -> None:
    row = RowTypeInfo([Types.LONG()], ["a"])  # type: ignore[arg-type]
    assert row.field_types == (Types.LONG(),)
    assert row == Types.ROW_NAMED(["a"], [Types.LONG()])
    by_type: dict[Any, int] = {row: 1}
    assert by_type[Types.ROW_NAMED(["a"], [Types.LONG()])] == 1


# -- JSON round trip and rendering ------------------------------------------------------


def _types() -> st.SearchStrategy[TypeInformation]:
    leaves = st.one_of(
        st.sampled_from(sorted(ATOMIC)).map(atomic),
        st.just(Types.PICKLED_BYTE_ARRAY()),
        st.sampled_from(PRIMITIVES).map(lambda n: Types.PRIMITIVE_ARRAY(atomic(n))),
        st.sampled_from([*PRIMITIVES, "STRING"]).map(lambda n: Types.BASIC_ARRAY(atomic(n))),
        st.sampled_from(UNMAPPED_ARROW).map(ArrowTypeInfo),
    )
    names = st.lists(st.text(min_size=1, max_size=5), max_size=3, unique=True)

    def extend(inner: st.SearchStrategy[TypeInformation]) -> st.SearchStrategy[TypeInformation]:
        return st.one_of(
            inner.map(Types.LIST),
            inner.map(Types.OBJECT_ARRAY),
            st.tuples(inner, inner)
            .filter(lambda kv: kv[0] != ArrowTypeInfo(pa.null()))  # Arrow map keys are never null
            .map(lambda kv: Types.MAP(*kv)),
            st.lists(inner, max_size=3).map(Types.ROW),
            st.lists(inner, max_size=3).map(Types.TUPLE),
            names.flatmap(
                lambda ns: st.lists(inner, min_size=len(ns), max_size=len(ns)).map(
                    lambda ts: Types.ROW_NAMED(ns, ts)
                )
            ),
        )

    return st.recursive(leaves, extend, max_leaves=8)


@given(_types())
def test_json_round_trip(t: TypeInformation) -> None:
    text = json.dumps(t.to_json())
    back = type_from_json(json.loads(text))
    assert back == t
    assert type(back) is type(t)
    assert back.to_arrow() == t.to_arrow()
    assert str(back) == str(t)


@given(_types())
def test_every_type_has_an_arrow_type_and_back(t: TypeInformation) -> None:
    arrow = t.to_arrow()
    assert isinstance(arrow, pa.DataType)
    # Arrow has no CHAR, TUPLE or array kinds: mapping back is lossy, but stable.
    again = to_type_info(arrow)
    assert again.to_arrow() == arrow
    assert to_type_info(again.to_arrow()) == again


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"type": "VARCHAR"},
        {"type": "LIST"},
        {"type": "MAP", "key": {"type": "LONG"}},
        {"type": "ROW", "fields": [{"type": "LONG"}]},
        {"type": "ARROW", "schema": "zz"},
        {"type": "ARROW", "schema": "00"},
        {"type": "PRIMITIVE_ARRAY", "element": {"type": "STRING"}},
        {"type": ["LONG"]},
        None,
        "LONG",
    ],
)
def test_malformed_json_is_a_typed_error(data: Any) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        type_from_json(data)
    assert_code(info.value, "UNSUPPORTED_TYPE")


def test_str() -> None:
    assert str(Types.MAP(Types.STRING(), Types.LIST(Types.LONG()))) == ("MAP<STRING, LIST<LONG>>")
    row = Types.ROW_NAMED(["a", "b"], [Types.LONG(), Types.PRIMITIVE_ARRAY(Types.BYTE())])
    assert str(row) == "ROW<a LONG, b PRIMITIVE_ARRAY<BYTE>>"
    assert str(Types.TUPLE([Types.INT(), Types.STRING()])) == "TUPLE<f0 INT, f1 STRING>"
    assert str(Types.BASIC_ARRAY(Types.CHAR())) == "BASIC_ARRAY<CHAR>"
    assert str(Types.PICKLED_BYTE_ARRAY()) == "PICKLED_BYTE_ARRAY"
    assert str(ArrowTypeInfo(pa.float16())) == "ARROW<halffloat>"
    assert str(Types.ROW([])) == "ROW<>"


# -- inference ----------------------------------------------------------------------------

Point = collections.namedtuple("Point", ["x", "label"])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, Types.BOOLEAN()),
        (False, Types.BOOLEAN()),
        (0, Types.LONG()),
        (-(2**63), Types.LONG()),
        ("", Types.STRING()),
        ("k", Types.STRING()),
        (1.5, Types.DOUBLE()),
        (b"", Types.PRIMITIVE_ARRAY(Types.BYTE())),
        (bytearray(b"x"), Types.PRIMITIVE_ARRAY(Types.BYTE())),
        ((1, "a"), Types.ROW([Types.LONG(), Types.STRING()])),
        ((True, 1), Types.ROW([Types.BOOLEAN(), Types.LONG()])),
        (
            (True, (2.0, b"z")),
            Types.ROW([Types.BOOLEAN(), Types.ROW([Types.DOUBLE(), Types.PRIMITIVE_ARRAY(Types.BYTE())])]),
        ),
        ((), Types.ROW([])),
        (Point(1, "p"), Types.ROW([Types.LONG(), Types.STRING()])),  # a namedtuple is a tuple
    ],
    ids=repr,
)
def test_infer_type(value: Any, expected: TypeInformation) -> None:
    assert infer_type(value) == expected


@pytest.mark.parametrize(
    "value",
    [None, (1, None), (1, (None,)), [1, 2], {"a": 1}, {1}, object(), datetime.date(2020, 1, 1)],
    ids=repr,
)
def test_infer_type_refuses_what_it_cannot_type(value: Any) -> None:
    with pytest.raises(StateTypeError) as info:
        infer_type(value)
    assert_code(info.value, "UNSUPPORTED_KEY_TYPE")
    assert "declare the type" in str(info.value)


def test_map_keys_cannot_be_null_typed() -> None:
    with pytest.raises(FlinkStateError, match="UNSUPPORTED_TYPE"):
        Types.MAP(pa.null(), Types.LONG())
