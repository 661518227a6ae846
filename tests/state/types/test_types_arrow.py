"""Type information and Arrow: every type maps to an Arrow type, and a ``pyarrow``
type is accepted wherever a type is."""

from __future__ import annotations

import pyarrow as pa
import pytest
from test_types import ATOMIC, UNMAPPED_ARROW, atomic

from flinkstate.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    TypeInformation,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.types.mapping import (
    ArrowTypeInfo,
    to_type_info,
)

# -- pyarrow types accepted wherever a type is -----------------------------------------

ARROW_TO_TYPE: list[tuple[pa.DataType, TypeInformation]] = [
    *((arrow, atomic(name)) for name, (arrow, _) in ATOMIC.items() if name != "CHAR"),
    (pa.large_string(), Types.STRING()),
    (pa.binary(), Types.PRIMITIVE_ARRAY(Types.BYTE())),
    (pa.large_binary(), Types.PRIMITIVE_ARRAY(Types.BYTE())),
    (pa.list_(pa.int64()), Types.LIST(Types.LONG())),
    (pa.large_list(pa.string()), Types.LIST(Types.STRING())),
    (
        pa.map_(pa.string(), pa.list_(pa.int32())),
        Types.MAP(Types.STRING(), Types.LIST(Types.INT())),
    ),
    (
        pa.struct([("id", pa.int64()), ("tags", pa.list_(pa.string()))]),
        Types.ROW_NAMED(["id", "tags"], [Types.LONG(), Types.LIST(Types.STRING())]),
    ),
    (
        pa.list_(pa.struct([("m", pa.map_(pa.int32(), pa.binary()))])),
        Types.LIST(Types.ROW_NAMED(["m"], [Types.MAP(Types.INT(), Types.PRIMITIVE_ARRAY(Types.BYTE()))])),
    ),
]


@pytest.mark.parametrize(("arrow", "expected"), ARROW_TO_TYPE, ids=str)
def test_to_type_info_maps_arrow_types(arrow: pa.DataType, expected: TypeInformation) -> None:
    assert to_type_info(arrow) == expected


@pytest.mark.parametrize("arrow", UNMAPPED_ARROW, ids=str)
def test_unmapped_arrow_types_become_arrow_type_info(arrow: pa.DataType) -> None:
    t = to_type_info(arrow)
    assert t == ArrowTypeInfo(arrow)
    assert t.to_arrow() == arrow
    assert t.python_type is object
    assert str(t) == f"ARROW<{arrow}>"


def test_unmapped_arrow_types_nested_inside_mapped_ones() -> None:
    t = to_type_info(pa.map_(pa.string(), pa.list_(pa.float16())))
    assert t == Types.MAP(Types.STRING(), Types.LIST(ArrowTypeInfo(pa.float16())))
    row = to_type_info(pa.struct([("u", pa.uint16())]))
    assert row == Types.ROW_NAMED(["u"], [ArrowTypeInfo(pa.uint16())])


def test_pyarrow_types_accepted_by_factories_and_descriptors() -> None:
    assert Types.LIST(pa.int64()) == Types.LIST(Types.LONG())
    assert Types.MAP(pa.string(), pa.list_(pa.float64())) == Types.MAP(
        Types.STRING(), Types.LIST(Types.DOUBLE())
    )
    assert Types.ROW_NAMED(["a"], [pa.bool_()]) == Types.ROW_NAMED(["a"], [Types.BOOLEAN()])
    assert Types.TUPLE([pa.int32()]) == Types.TUPLE([Types.INT()])
    assert Types.PRIMITIVE_ARRAY(pa.int8()) == Types.PRIMITIVE_ARRAY(Types.BYTE())
    assert ValueStateDescriptor("v", pa.int64()).type_info == Types.LONG()
    assert ListStateDescriptor("l", pa.string()).type_info == Types.STRING()
    m = MapStateDescriptor("m", pa.string(), pa.float16())
    assert (m.key_type_info, m.type_info) == (Types.STRING(), ArrowTypeInfo(pa.float16()))
    t = Types.LONG()
    assert to_type_info(t) is t


# -- to_arrow ---------------------------------------------------------------------------


def test_to_arrow_of_composites() -> None:
    assert Types.PRIMITIVE_ARRAY(Types.BYTE()).to_arrow() == pa.binary()
    assert Types.PRIMITIVE_ARRAY(Types.INT()).to_arrow() == pa.list_(pa.int32())
    assert Types.BASIC_ARRAY(Types.STRING()).to_arrow() == pa.list_(pa.string())
    assert Types.OBJECT_ARRAY(Types.SQL_DATE()).to_arrow() == pa.list_(pa.date32())
    assert Types.LIST(Types.LIST(Types.CHAR())).to_arrow() == pa.list_(pa.list_(pa.string()))
    assert Types.MAP(Types.INT(), Types.BIG_DEC()).to_arrow() == pa.map_(pa.int32(), pa.decimal128(38, 18))
    assert Types.PICKLED_BYTE_ARRAY().to_arrow() == pa.binary()
    row = Types.ROW_NAMED(["a", "b"], [Types.INSTANT(), Types.LIST(Types.FLOAT())])
    assert row.to_arrow() == pa.struct([("a", pa.timestamp("us", tz="UTC")), ("b", pa.list_(pa.float32()))])
    assert Types.TUPLE([Types.SHORT()]).to_arrow() == pa.struct([("f0", pa.int16())])
    assert Types.ROW([]).to_arrow() == pa.struct([])
